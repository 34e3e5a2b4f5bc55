#include "model/input_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/checked.h"
#include "model/error.h"

namespace reshard {

namespace checked {

void ThrowOverflow(const Source& at, const char* op, int64_t a, int64_t b) {
  throw InputError(at.file, at.field, fmt::format("the value overflows int64 ({} {} {})", a, op, b));
}

int64_t ToInt64(double v, const Source& at) {
  // 2^63 is the first double above INT64_MAX.
  if (!std::isfinite(v) || v >= 9223372036854775808.0 || v < -9223372036854775808.0)
    throw InputError(at.file, at.field, fmt::format("the value {:g} does not fit in int64", v));
  return static_cast<int64_t>(std::llround(v));
}

}  // namespace checked

const char* FileKindName(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

namespace {

std::string NotRegular(mode_t mode, std::string_view what) {
  return fmt::format("is {}, not a regular file; give the {} as a file", FileKindName(mode), what);
}

}  // namespace

void RequireRegularFile(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  if (!S_ISREG(st.st_mode)) throw InputError(path, "", NotRegular(st.st_mode, what));
}

void AdviseHugePages(const void* data, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const auto begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice: failure is harmless
#else
  (void)data, (void)bytes;
#endif
}

std::string ReadInputFile(const std::string& path, std::string_view what, int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(path, "", fmt::format("cannot open the {}: {}", what, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(path, "", fmt::format("cannot read the {}: {}", what, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw InputError(path, "", NotRegular(st.st_mode, what));
  if (st.st_size > max_bytes)
    throw InputError(path, "", fmt::format("the {} is {} bytes, more than the {} MiB reshard reads", what,
                                           static_cast<int64_t>(st.st_size), max_bytes >> 20));
  std::string text;
  try {
    text.reserve(static_cast<size_t>(st.st_size));
  } catch (const std::bad_alloc&) {  // under the cap but more than this process may allocate (ulimit -v, memory)
    throw InputError(path, "", fmt::format("the {} is {} bytes, more memory than this process could get to read it",
                                           what, static_cast<int64_t>(st.st_size)));
  }
  // Read straight into the string (no bounce buffer), on huge pages where
  // the system gives them: for a plan of hundreds of MB the page faults cost
  // more than the copy.
  AdviseHugePages(text.data(), text.capacity());
  text.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(path, "", fmt::format("reading the {} failed: {}", what, std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  if (got < static_cast<size_t>(st.st_size)) return text;  // shrank while read
  std::vector<char> buf(1 << 16);
  for (;;) {  // grew while read (or a file whose size stat does not know)
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(path, "", fmt::format("reading the {} failed: {}", what, std::strerror(errno)));
    }
    text.append(buf.data(), static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > max_bytes)  // grew while read
      throw InputError(path, "", fmt::format("the {} is more than the {} MiB reshard reads", what, max_bytes >> 20));
  }
  return text;
}

nlohmann::json ParseJsonInput(const std::string& text, const std::string& path) {
  using Json = nlohmann::json;
  // One frame per open object or array: the keys seen so far (objects) and
  // the name of the current child, for the dotted path of a duplicate.
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
    std::string child;
    size_t index = 0;
  };
  std::vector<Frame> stack;
  auto field = [&] {
    std::string f;
    for (const Frame& fr : stack) {
      if (fr.object) {
        if (!f.empty()) f += '.';
        f += fr.child;
      }
      else if (fr.index > 0) f += fmt::format("[{}]", fr.index - 1);
    }
    return f;
  };
  auto child_starts = [&] {
    if (!stack.empty() && !stack.back().object) ++stack.back().index;
  };
  auto open = [&](bool object) {
    child_starts();
    if (static_cast<int>(stack.size()) >= kMaxJsonDepth)
      throw InputError(path, field().substr(0, 60), fmt::format("nested more than {} levels deep", kMaxJsonDepth));
    stack.push_back(Frame{object, {}, {}, 0});
  };
  Json::parser_callback_t cb = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start: open(true); break;
      case Json::parse_event_t::array_start: open(false); break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case Json::parse_event_t::key: {
        Frame& top = stack.back();
        top.child = parsed.get<std::string>();
        if (!top.keys.insert(top.child).second)
          throw InputError(path, field(), "duplicate key (given twice in one object; a field may be given once)");
        break;
      }
      case Json::parse_event_t::value: child_starts(); break;
    }
    return true;
  };
  return Json::parse(text, cb);
}

}  // namespace reshard
