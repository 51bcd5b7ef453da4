#pragma once
// The dashboard's page, script, styles and uPlot, compiled into the binary
// (generated from src/cli/dashboard/page/ and third_party/uplot/ by
// cmake/EmbedAssets.cmake): the page works offline, wherever dtrain is copied.
#include <string_view>
#include <vector>

namespace dtrain::cli::dashboard {

struct Asset {
  std::string_view url;   // "/", "/dashboard.js", ...
  std::string_view mime;  // the Content-Type it is served with
  std::string_view body;
};

const std::vector<Asset>& assets();

}  // namespace dtrain::cli::dashboard
