#include "tensor/cpu/Reduce.h"
