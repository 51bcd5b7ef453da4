#include "tensor/cpu/Elementwise.h"
