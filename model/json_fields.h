// Readers for JSON fields that name the file and field at fault: the shared
// vocabulary of model/'s parsers (clusters, profiles, host costs). Each throws
// InputError(file, field, problem) on a wrong type, a missing field or an
// unknown key (with a "did you mean" suggestion).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace reshard::json_fields {

// "a.b", or "b" when `a` is empty.
std::string Dot(const std::string& a, std::string_view b);
[[noreturn]] void Bad(const std::string& file, const std::string& field, const std::string& problem);
std::string TypeName(const nlohmann::json& j);
void CheckObject(const nlohmann::json& j, const std::string& file, const std::string& field);
void CheckKeys(const nlohmann::json& j, const std::string& file, const std::string& field,
               const std::vector<std::string>& allowed);
const nlohmann::json& Need(const nlohmann::json& j, const std::string& key, const std::string& file,
                           const std::string& field);
int64_t GetInt(const nlohmann::json& j, const std::string& file, const std::string& field);
double GetNumber(const nlohmann::json& j, const std::string& file, const std::string& field);  // finite
bool GetBool(const nlohmann::json& j, const std::string& file, const std::string& field);
std::string GetString(const nlohmann::json& j, const std::string& file, const std::string& field);

}  // namespace reshard::json_fields
