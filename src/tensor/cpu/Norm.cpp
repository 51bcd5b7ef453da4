#include "tensor/cpu/Norm.h"
