#pragma once
// dtrain's command line (train, bench, generate, export) as a function: a
// program's own main can register its models and datasets and then hand over,
//   int main(int argc, char** argv) {
//     dtrain::nn::registerModel("my-net", dtrain::nn::classifier(buildMyNet));
//     return dtrain::cli::main(argc, argv);   // ./app train --model my-net --workers 2
//   }
namespace dtrain::cli {

// Parses argv, runs the command, returns the exit code (0; 2 for bad usage or
// configuration; 1 for a failure while running), errors as one line on stderr.
int main(int argc, char** argv);

}  // namespace dtrain::cli
