#pragma once
// The shard files a pattern names, as WebDataset and nanoGPT users write them:
//   DIR/train-{0000..0127}.tar   a brace range (zero padding kept: the width of the first
//                                bound), several ranges multiply out
//   DIR/train-{a,b}.tar          a brace list
//   DIR/test-*.tar               a glob (*, ?, [..]) over existing files, sorted
//   a.tar b.tar                  several patterns separated by spaces or commas outside braces
// Every file a brace names must exist; a glob must match at least one file (UsageError
// naming the pattern, with `flag` in front, e.g. "--train-data").
#include <string>
#include <vector>

namespace dtrain::data {

// The brace expansion alone (no file system), in order.
std::vector<std::string> expandBraces(const std::string& pattern);

std::vector<std::string> expandShardPattern(const std::string& patterns, const std::string& flag);

}  // namespace dtrain::data
