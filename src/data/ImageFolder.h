#pragma once
// An image folder as torchvision's ImageFolder reads it: DIR/<class>/... , one sub-folder
// per class, the classes sorted by name and numbered 0, 1, ...; the files of each class
// (sub-folders included) sorted by path. Files with an image extension (.jpg, .jpeg, .png,
// and those torchvision knows but dtrain does not decode: .bmp, .gif, .ppm, .pgm, .tif,
// .tiff, .webp; any case) are samples; others (a README, .DS_Store) are not.
#include <string>
#include <vector>

#include "data/ShardSet.h"

namespace dtrain::data {

struct ImageFolderListing {
  std::vector<std::string> classes;
  std::vector<FolderImage> images;
};

// `classes` (a test folder's: the training folder's names) fixes the numbering; a class
// folder not among them is a UsageError. UsageError naming DIR when it is not a folder of
// class folders or holds no images.
ImageFolderListing listImageFolder(const std::string& dir,
                                   const std::vector<std::string>* classes = nullptr);

}  // namespace dtrain::data
