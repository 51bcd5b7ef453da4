// The `dtrain` command. Errors become one line on stderr and an exit code:
// 2 for bad usage or configuration, 1 for a failure while running.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>

#include "cli/TrainCommand.h"
#include "core/Error.h"

int main(int argc, char** argv) {
  CLI::App app{"dtrain: distributed and parallel deep-learning training", "dtrain"};
  app.set_version_flag("--version", "dtrain 0.1.0");
  app.require_subcommand(1);
  dtrain::cli::addTrainCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dtrain: error: %s (see dtrain --help)\n", e.what());
    return 2;
  } catch (const dtrain::UsageError& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return 2;
  } catch (const dtrain::Error& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dtrain: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
