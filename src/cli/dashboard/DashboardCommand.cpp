#include "cli/dashboard/DashboardCommand.h"

#include <memory>

#include "core/Error.h"
#ifdef DTRAIN_WITH_DASHBOARD
#include "cli/dashboard/Server.h"
#endif

namespace dtrain::cli {

namespace {
struct DashboardFlags {
  std::vector<std::string> sources;
  std::string host = "127.0.0.1";
  int port = 8050;
};

void run(const DashboardFlags& f) {
#ifdef DTRAIN_WITH_DASHBOARD
  dashboard::ServerOptions o;
  o.sources = f.sources.empty() ? std::vector<std::string>{"."} : f.sources;
  o.host = f.host;
  o.port = f.port;
  dashboard::serve(o);
#else
  throw UsageError("dtrain dashboard: this dtrain was built without cpp-httplib (install "
                   "libcpp-httplib-dev and reconfigure)");
#endif
}
}  // namespace

void addDashboardCommand(CLI::App& app) {
  auto f = std::make_shared<DashboardFlags>();
  CLI::App* sub = app.add_subcommand(
      "dashboard", "Serve a web page that follows runs as they write (charts of their metrics)");
  sub->add_option("runs", f->sources,
                  "Run directories (--run-dir), directories of them, or --metrics files "
                  "(default: the current directory)");
  sub->add_option("--port", f->port, "TCP port (0: any free one; the URL is printed)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--host", f->host,
                  "Address to listen on (127.0.0.1: this machine only; the page has no login)");
  sub->callback([f] { run(*f); });
}

}  // namespace dtrain::cli
