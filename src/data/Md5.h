#pragma once
// MD5 (RFC 1321), only to check that a materialized corpus is byte-for-byte the one the
// peers train on (zlib offers CRC-32/Adler-32 but no MD5, and published corpus digests
// are MD5). Not for anything security related.
#include <cstdint>
#include <span>
#include <string>

namespace dtrain::data {

// The 32 lower-case hex digits of the MD5 digest of `bytes`.
std::string md5Hex(std::span<const uint8_t> bytes);

}  // namespace dtrain::data
