// The `dtrain` program: the command line of cli/Cli.h.
#include "cli/Cli.h"

int main(int argc, char** argv) { return dtrain::cli::main(argc, argv); }
