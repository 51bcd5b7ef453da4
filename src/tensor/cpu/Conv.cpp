#include "tensor/cpu/Conv.h"
