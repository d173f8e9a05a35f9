// format.cpp -- durations, times, JSON and shell quoting for the dlock tool.
#include <cctype>
#include <cstdio>
#include <ctime>
#include <regex>

#include "cli.hpp"

namespace dlock_cli {

std::chrono::milliseconds parse_duration(const std::string& text, const std::string& flag) {
    static const std::regex pattern{R"(^([0-9]{1,9})(ms|s|m|h)$)"};
    std::smatch m;
    if (!std::regex_match(text, m, pattern))
        throw usage_error{flag + ": invalid duration \"" + text +
                          "\" (use a whole number and a unit: 500ms, 30s, 5m, 1h)"};
    const long long n = std::stoll(m[1].str());
    const std::string unit = m[2].str();
    const long long factor = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60000 : 3600000;
    return std::chrono::milliseconds{n * factor};
}

std::string format_duration(std::chrono::milliseconds value) {
    const bool negative = value.count() < 0;
    long long ms = negative ? -value.count() : value.count();
    char buf[64];
    if (ms < 1000)
        std::snprintf(buf, sizeof buf, "%lldms", ms);
    else if (ms < 60000)
        std::snprintf(buf, sizeof buf, "%llds", ms / 1000);
    else if (ms < 3600000)
        std::snprintf(buf, sizeof buf, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
    else if (ms < 86400000)
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
    else
        std::snprintf(buf, sizeof buf, "%lldd%02lldh", ms / 86400000, ms / 3600000 % 24);
    return (negative ? "-" : "") + std::string{buf};
}

std::string format_time(std::chrono::system_clock::time_point value) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(value.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
    return buf;
}

std::string shell_quote(const std::string& text) {
    std::string out = "'";
    for (const char ch : text)
        out += ch == '\'' ? std::string{"'\\''"} : std::string(1, ch);
    return out + "'";
}

void check_lock_name(const std::string& name, const std::string& what) {
    if (name.empty()) throw usage_error{what + ": must not be empty"};
    std::size_t chars = 0;
    for (const char ch : name)
        if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++chars; // UTF-8 lead bytes
    if (chars > 200) throw usage_error{what + ": longer than 200 characters"};
}

void check_owner_token(const std::string& token) {
    static const std::regex uuid{
        R"(^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$)"};
    if (token.empty()) throw usage_error{"--owner-token: required (or set DLOCK_OWNER_TOKEN)"};
    if (!std::regex_match(token, uuid)) throw usage_error{"--owner-token: not a UUID: \"" + token + "\""};
}

dlock::wait_mode parse_wait_mode(const std::string& text) {
    if (text == "auto") return dlock::wait_mode::automatic;
    if (text == "server") return dlock::wait_mode::server;
    if (text == "poll") return dlock::wait_mode::poll;
    throw usage_error{"--wait-mode: invalid value \"" + text + "\" (use auto, server or poll)"};
}

dlock::pooling parse_pooling(const std::string& text) {
    if (text == "detect") return dlock::pooling::detect;
    if (text == "none") return dlock::pooling::none;
    if (text == "transaction") return dlock::pooling::transaction;
    throw usage_error{"--pooling: invalid value \"" + text + "\" (use detect, none or transaction)"};
}

dlock::durability parse_durability(const std::string& text) {
    if (text == "durable") return dlock::durability::durable;
    if (text == "fenced") return dlock::durability::fenced;
    throw usage_error{"--durability: invalid value \"" + text + "\" (use durable or fenced)"};
}

} // namespace dlock_cli
