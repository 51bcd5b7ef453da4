// The `dtrain` command as a function, so that a program that registers its own
// models (nn::registerModel) can offer dtrain's whole CLI and config files.
// Errors become one line on stderr and an exit code:
// 2 for bad usage or configuration, 1 for a failure while running. Under
// mpirun, comm::shutdown() prints the failing rank's line and aborts the job so
// the other ranks stop at once instead of waiting for their timeouts.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli/Cli.h"

#include "api/Schema.h"
#include "cli/BenchCommand.h"
#include "cli/CalibrateCommand.h"
#include "cli/DataCommand.h"
#include "cli/dashboard/DashboardCommand.h"
#include "cli/ExportCommand.h"
#include "cli/GenerateCommand.h"
#include "cli/LaunchCommand.h"
#include "cli/PlanCommand.h"
#include "cli/SimulateCommand.h"
#include "cli/TrainCommand.h"
#include "comm/BackendRegistry.h"
#include "core/Error.h"
#include "core/StopSignal.h"

namespace {

int fail(int code, const std::string& line) {
  std::fprintf(stderr, "dtrain: %s\n", line.c_str());
  std::fflush(stderr);
  dtrain::comm::shutdown(code);  // no-op unless MPI was started
  return code;
}

// Names an unknown command instead of CLI11's "a subcommand is required".
void checkCommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return;
  std::string known;
  for (auto* s : app.get_subcommands({})) {
    if (s->get_name() == argv[1]) return;
    known += (known.empty() ? "" : ", ") + s->get_name();
  }
  throw dtrain::UsageError(std::string("unknown command '") + argv[1] + "' (known: " + known + ")");
}

// "unknown flag --epoch; did you mean --epochs?" for the first flag the command
// does not have (CLI11 says only "arguments were not expected: 2 --epoch");
// "" when every flag is known.
std::string unknownFlag(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return "";
  CLI::App* command = nullptr;
  for (auto* s : app.get_subcommands({}))
    if (s->get_name() == argv[1]) command = s;
  if (!command) return "";
  std::vector<std::string> flags;
  for (const CLI::Option* o : command->get_options())
    for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") continue;
    const std::string flag = arg.substr(0, arg.find('='));
    if (std::find(flags.begin(), flags.end(), flag) != flags.end()) continue;
    std::string best;
    size_t bestD = std::string::npos;
    for (const std::string& f : flags)
      if (const size_t d = dtrain::api::editDistance(flag, f); d < bestD) bestD = d, best = f;
    const bool near = bestD <= std::max<size_t>(2, flag.size() / 3);
    return "unknown flag " + flag + (near ? "; did you mean " + best + "?" : "") + " (see dtrain " +
           argv[1] + " --help)";
  }
  return "";
}

}  // namespace

namespace dtrain::cli {

int main(int argc, char** argv) {
  CLI::App app{"dtrain: distributed and parallel deep-learning training", "dtrain"};
  app.set_version_flag("--version", "dtrain " DTRAIN_VERSION);
  app.require_subcommand(1);
  dtrain::cli::addTrainCommand(app);
  dtrain::cli::addBenchCommand(app);
  dtrain::cli::addGenerateCommand(app);
  dtrain::cli::addExportCommand(app);
  dtrain::cli::addLaunchCommand(app);
  dtrain::cli::addCalibrateCommand(app);
  dtrain::cli::addSimulateCommand(app);
  dtrain::cli::addPlanCommand(app);
  dtrain::cli::addDataCommand(app);
  dtrain::cli::addDashboardCommand(app);
  try {
    checkCommand(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    const std::string unknown = unknownFlag(app, argc, argv);
    return fail(2, "error: " + (unknown.empty() ? e.what() + std::string(" (see dtrain --help)") : unknown));
  } catch (const CLI::ParseError& e) {
    return fail(2, std::string("error: ") + e.what() + " (see dtrain --help)");
  } catch (const dtrain::stop::Interrupted& e) {
    return fail(dtrain::stop::signalExitCode(), e.what());
  } catch (const dtrain::UsageError& e) {
    return fail(2, std::string("error: ") + e.what());
  } catch (const dtrain::Error& e) {
    return fail(1, std::string("error: ") + e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "error: out of memory");
  } catch (const std::exception& e) {
    return fail(1, std::string("internal error: ") + e.what());
  }
  dtrain::comm::shutdown(0);
  return dtrain::stop::exitCode();  // 130 / 143 after a clean stop on a signal, else 0
}

}  // namespace dtrain::cli
