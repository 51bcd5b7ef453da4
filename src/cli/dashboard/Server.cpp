#include "cli/dashboard/Server.h"

#include <httplib.h>

#include <cstdio>
#include <optional>

#include "cli/dashboard/Assets.h"
#include "cli/dashboard/RunFiles.h"
#include "core/Error.h"

namespace dtrain::cli::dashboard {

namespace {

constexpr const char* kJson = "application/json";

std::optional<Run> findRun(const ServerOptions& o, const std::string& name) {
  for (Run& r : findRuns(o.sources))
    if (r.name == name) return r;
  return std::nullopt;
}

void notFound(httplib::Response& res, const std::string& what) {
  res.status = 404;
  res.set_content(nlohmann::json{{"error", what}}.dump(), kJson);
}

// Handlers of /api/run/NAME/...: the run by its name, or 404.
using RunHandler = std::function<void(const Run&, const httplib::Request&, httplib::Response&)>;
httplib::Server::Handler forRun(const ServerOptions& o, RunHandler handle) {
  return [&o, handle](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    if (const auto run = findRun(o, name)) handle(*run, req, res);
    else notFound(res, "no run " + name);
  };
}

// Serves a run's file as it is, or 404 when it has none (yet).
RunHandler runFile(const char* leaf, const char* mime) {
  return [leaf, mime](const Run& run, const httplib::Request&, httplib::Response& res) {
    if (const auto text = readFile(run.file(leaf))) res.set_content(*text, mime);
    else notFound(res, run.name + " has no " + leaf);
  };
}

void addRoutes(httplib::Server& s, const ServerOptions& o) {
  for (const Asset& a : assets())
    s.Get(std::string(a.url), [&a](const httplib::Request&, httplib::Response& res) {
      res.set_content(a.body.data(), a.body.size(), std::string(a.mime).c_str());
    });
  s.Get("/api/runs", [&o](const httplib::Request&, httplib::Response& res) {
    nlohmann::json runs = nlohmann::json::array();
    for (const Run& r : findRuns(o.sources)) runs.push_back(describeRun(r));
    res.set_content(runs.dump(), kJson);
  });
  const std::string run = R"(/api/run/([^/]+)/)";
  s.Get(run + "metrics", forRun(o, [](const Run& r, const httplib::Request& req, httplib::Response& res) {
          const uint64_t since = req.has_param("since") ? std::stoull(req.get_param_value("since")) : 0;
          const MetricsChunk c = readMetrics(r.metrics, since);
          res.set_content(nlohmann::json{{"records", c.records}, {"next", c.next},
                                         {"bad_lines", c.badLines}}.dump(), kJson);
        }));
  s.Get(run + "result", forRun(o, [](const Run& r, const httplib::Request&, httplib::Response& res) {
          const auto text = readFile(r.file("result.json"));
          const auto j = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
          res.set_content(j.is_discarded() ? "null" : j.dump(), kJson);
        }));
  s.Get(run + "config", forRun(o, runFile("config.toml", "text/plain")));
  s.Get(run + "timeline.json", forRun(o, runFile("timeline.json", kJson)));
  s.Get(run + "machine.json", forRun(o, runFile("machine.json", kJson)));
  // A bad `since` (not a number) is the client's error, not the server's end.
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 400;
    res.set_content(nlohmann::json{{"error", "bad request"}}.dump(), kJson);
  });
}

}  // namespace

void serve(const ServerOptions& o) {
  checkSources(o.sources);
  httplib::Server server;
  // SO_REUSEADDR alone: httplib's default adds SO_REUSEPORT, with which a second
  // dashboard on a busy port would bind too and share its connections.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  addRoutes(server, o);
  int port = o.port;
  if (port == 0) port = server.bind_to_any_port(o.host);
  else if (!server.bind_to_port(o.host, port)) port = -1;
  DTRAIN_CHECK_USAGE(port > 0, "dtrain dashboard: cannot listen on ", o.host, ":", o.port,
                     " (in use, or not an address of this machine); try another --port");
  std::printf("dashboard: http://%s:%d/\n", o.host.c_str(), port);
  std::fflush(stdout);
  DTRAIN_CHECK(server.listen_after_bind(), "dtrain dashboard: the server on ", o.host, ":", port,
               " stopped");
}

}  // namespace dtrain::cli::dashboard
