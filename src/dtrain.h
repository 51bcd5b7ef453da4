#pragma once
// dtrain's public API in one include: models from its layers (nn::Module and
// the layers, autograd ops), data (data::Dataset, TensorDataset), the
// configuration (api::RunConfig, config files), the one call that trains under
// any strategy (api::train), model registration, and the CLI as a function.
#include "api/ConfigFile.h"
#include "api/RunConfig.h"
#include "api/Schema.h"
#include "api/Train.h"
#include "autograd/Ops.h"
#include "cli/Cli.h"
#include "core/Error.h"
#include "core/Rng.h"
#include "data/Dataset.h"
#include "nn/Layers.h"
#include "nn/ModelRegistry.h"
#include "nn/Module.h"
#include "tensor/Tensor.h"
