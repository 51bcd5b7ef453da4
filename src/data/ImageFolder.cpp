#include "data/ImageFolder.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/Error.h"

namespace fs = std::filesystem;

namespace dtrain::data {
namespace {

bool isImageName(const fs::path& p) {
  static const std::set<std::string> kExtensions{".jpg", ".jpeg", ".png", ".bmp", ".gif", ".ppm",
                                                 ".pgm", ".tif", ".tiff", ".webp"};
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return kExtensions.count(ext) > 0;
}

std::vector<std::string> classFolders(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> imagesUnder(const fs::path& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
       !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && isImageName(it->path())) paths.push_back(it->path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

ImageFolderListing listImageFolder(const std::string& dir, const std::vector<std::string>* classes) {
  DTRAIN_CHECK_USAGE(fs::is_directory(dir), dir, ": not a folder (an image folder holds one "
                     "sub-folder of images per class: ", dir, "/<class>/*.jpg)");
  ImageFolderListing listing;
  const std::vector<std::string> found = classFolders(dir);
  DTRAIN_CHECK_USAGE(!found.empty(), dir, ": no class folders (an image folder holds one "
                     "sub-folder of images per class: ", dir, "/<class>/*.jpg)");
  listing.classes = classes ? *classes : found;
  for (const std::string& name : found) {
    const auto it = std::find(listing.classes.begin(), listing.classes.end(), name);
    DTRAIN_CHECK_USAGE(it != listing.classes.end(), dir, "/", name,
                       ": a class the training folder does not have (its classes: ",
                       listing.classes.size(), ", from ", listing.classes.front(), " to ",
                       listing.classes.back(), ")");
    const auto label = static_cast<int32_t>(it - listing.classes.begin());
    for (std::string& path : imagesUnder(fs::path(dir) / name))
      listing.images.push_back({std::move(path), label});
  }
  DTRAIN_CHECK_USAGE(!listing.images.empty(), dir, ": no images (.jpg, .jpeg, .png) in its ",
                     found.size(), " class folders");
  return listing;
}

}  // namespace dtrain::data
