#include "tensor/cpu/Softmax.h"
