#include "tensor/cpu/Blas.h"
