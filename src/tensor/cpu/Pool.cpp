#include "tensor/cpu/Pool.h"
