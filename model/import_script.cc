// The launch scripts that frameworks ship as examples (verl's
// examples/*/run_*.sh): a few shell assignments, then one
// `python3 -m verl.trainer.main_ppo KEY=VALUE ...` command split over lines
// with backslashes. Read without running a shell: simple assignments
// (`x=v`, `x="v"`, `X=${X:-default}`) are remembered, the command's KEY=VALUE
// words are taken as overrides with $x / ${x} substituted; a word whose value
// still needs the shell ($((...)), $(cmd), an unknown variable) is skipped
// and named. O(script length).
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/error.h"
#include "model/import.h"

namespace reshard {

namespace {

std::string Unquote(std::string v) {
  if (v.size() >= 2 && ((v.front() == '"' && v.back() == '"') || (v.front() == '\'' && v.back() == '\'')))
    return v.substr(1, v.size() - 2);
  return v;
}

// $x, ${x}, ${x:-default} replaced from `vars`; false when something is left
// that only a shell could evaluate.
bool Substitute(const std::string& in, const std::map<std::string, std::string>& vars, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size();) {
    if (in[i] != '$') {
      out += in[i++];
      continue;
    }
    if (i + 1 < in.size() && in[i + 1] == '{') {
      const size_t close = in.find('}', i);
      if (close == std::string::npos) return false;
      std::string body = in.substr(i + 2, close - i - 2), fallback;
      bool has_fallback = false;
      if (const size_t d = body.find(":-"); d != std::string::npos) {
        fallback = body.substr(d + 2);
        body = body.substr(0, d);
        has_fallback = true;
      }
      if (auto it = vars.find(body); it != vars.end()) {
        out += it->second;
      } else if (has_fallback) {
        std::string f;
        if (!Substitute(Unquote(fallback), vars, f)) return false;
        out += f;
      } else {
        return false;
      }
      i = close + 1;
      continue;
    }
    size_t j = i + 1;
    while (j < in.size() && (std::isalnum(static_cast<unsigned char>(in[j])) || in[j] == '_')) ++j;
    if (j == i + 1) return false;  // $( ... ), $@, $((...)): the shell's
    auto it = vars.find(in.substr(i + 1, j - i - 1));
    if (it == vars.end()) return false;
    out += it->second;
    i = j;
  }
  return true;
}

// Words of a command line, quotes kept inside a word, split on blanks outside quotes.
std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      cur += c;
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      cur += c;
      quote = c;
    } else if (c == ' ' || c == '\t') {
      if (!cur.empty()) out.push_back(cur), cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

LaunchScript ReadLaunchScript(const std::string& path, const std::string& entry) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "", "cannot read the launch script");
  std::map<std::string, std::string> vars;
  LaunchScript out;
  std::string line, command;
  bool in_command = false;
  while (std::getline(in, line)) {
    if (const size_t hash = line.find(" #"); hash != std::string::npos) line.resize(hash);
    if (!line.empty() && line[0] == '#') continue;
    const bool continued = !line.empty() && line.find_last_not_of(" \t") != std::string::npos &&
                           line[line.find_last_not_of(" \t")] == '\\';
    if (continued) line.resize(line.find_last_not_of(" \t"));
    if (!in_command && line.find(entry) != std::string::npos) in_command = true;
    if (in_command) {
      command += " " + line;
      if (!continued) break;
      continue;
    }
    // NAME=value (export allowed): remembered when the shell is not needed to evaluate it.
    std::string t = line;
    if (t.starts_with("export ")) t = t.substr(7);
    const size_t eq = t.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = t.substr(0, eq);
    if (name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      continue;
    std::string value;
    if (Substitute(Unquote(t.substr(eq + 1)), vars, value)) vars[name] = value;
  }
  if (command.empty())
    throw InputError(path, "", fmt::format("no '{}' command in this script: give the config YAML, or the script that "
                                           "launches {}",
                                           entry, entry));
  for (const std::string& w : Words(command)) {
    if (w.starts_with("--config-name")) {
      const size_t eq = w.find('=');
      out.config_name = Unquote(eq == std::string::npos ? "" : w.substr(eq + 1));
      continue;
    }
    if (w.starts_with("-") || w.find('=') == std::string::npos) continue;
    const std::string key = w.substr(0, w.find('='));
    if (key.find('.') == std::string::npos) continue;  // not a config key
    std::string value;
    if (!Substitute(Unquote(w.substr(w.find('=') + 1)), vars, value)) {
      out.skipped.push_back(w);
      continue;
    }
    out.overrides.push_back(key + "=" + value);
  }
  return out;
}

}  // namespace reshard
