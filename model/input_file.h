// Reading input files with bounds, so that no input reaches a hang or
// bad_alloc: regular files only (a FIFO, /dev/zero or a directory is refused
// before a byte is read), a size cap, read errors checked; and parsing JSON
// with a nesting cap and duplicate keys refused. Every refusal is an
// InputError naming the file (and the field for a duplicate key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace reshard {

// Caps: text inputs (scenarios, HF configs, profiles) are kilobytes; a plan of
// the largest scenarios is hundreds of megabytes.
inline constexpr int64_t kMaxTextInputBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxPlanInputBytes = int64_t{4} << 30;
// Deepest nesting any reader accepts (a scenario is 4 deep, an HF config 3).
inline constexpr int kMaxJsonDepth = 64;

// The whole file, or InputError(path, "", problem): missing ("cannot open
// `what`"), not a regular file, larger than `max_bytes`, or a read error.
std::string ReadInputFile(const std::string& path, std::string_view what, int64_t max_bytes = kMaxTextInputBytes);

// Asks the kernel to back [data, data + bytes) with huge pages (transparent
// huge pages in madvise mode): big buffers then cost hundreds of times fewer
// page faults. Whole 2 MiB pages inside the range only; a no-op elsewhere.
void AdviseHugePages(const void* data, size_t bytes);

// Throws InputError(path, "", ...) unless `path` is a regular file (a missing
// file passes: the reader's open reports it).
void RequireRegularFile(const std::string& path, std::string_view what);

// What a non-regular file is, for messages ("a directory", "a FIFO (named
// pipe)", ...), from stat's st_mode.
const char* FileKindName(unsigned mode);

// json::parse with objects and arrays nested at most kMaxJsonDepth deep and
// no key given twice in one object (InputError naming the key's dotted path).
// Syntax errors throw nlohmann's parse_error as json::parse does.
nlohmann::json ParseJsonInput(const std::string& text, const std::string& path);

}  // namespace reshard
