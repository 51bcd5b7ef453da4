// The `dtrain` command. Errors become one line on stderr and an exit code:
// 2 for bad usage or configuration, 1 for a failure while running.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli/TrainCommand.h"
#include "core/Error.h"

int main(int argc, char** argv) {
  CLI::App app{"dtrain: distributed and parallel deep-learning training", "dtrain"};
  app.set_version_flag("--version", "dtrain 0.1.0");
  app.require_subcommand(1);
  dtrain::cli::addTrainCommand(app);
  try {
    // Name an unknown command instead of CLI11's "a subcommand is required".
    std::string known;
    bool isKnown = false;
    for (auto* s : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + s->get_name();
      isKnown = isKnown || (argc > 1 && s->get_name() == argv[1]);
    }
    if (argc > 1 && argv[1][0] != '-' && !isKnown) {
      throw dtrain::UsageError(std::string("unknown command '") + argv[1] + "' (known: " + known + ")");
    }
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
