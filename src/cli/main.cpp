// The `dtrain` program: the command line of cli/Cli.h.
#include "cli/Cli.h"
#include "cli/WaitPolicy.h"

int main(int argc, char** argv) {
  dtrain::cli::restartWithPassiveOpenMpWait(argv);  // cli/WaitPolicy.h
  return dtrain::cli::main(argc, argv);
}
