// tests/faults/worker/history.cpp -- JSON-lines history writer and its clock.
#include "history.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <stdexcept>

namespace faults {

std::int64_t history_clock_ns() noexcept {
    timespec now{};
    // A direct system call: libfaketime interposes clock_gettime() in libc only.
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

namespace {

void append_json_string(std::string& out, std::string_view value) {
    out += '"';
    for (char c : value) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r':
        case '\t': out += ' '; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20)
                out += ' ';
            else
                out += c;
        }
    }
    out += '"';
}

} // namespace

record::record(std::string_view worker, std::int64_t op_id, std::string_view event) {
    m_text = "{\"t\":" + std::to_string(history_clock_ns());
    str("w", worker);
    num("id", op_id);
    str("ev", event);
}

record& record::str(std::string_view key, std::string_view value) {
    m_text += ',';
    append_json_string(m_text, key);
    m_text += ':';
    append_json_string(m_text, value);
    return *this;
}

record& record::num(std::string_view key, std::int64_t value) {
    m_text += ',';
    append_json_string(m_text, key);
    m_text += ':';
    m_text += std::to_string(value);
    return *this;
}

record& record::flag(std::string_view key, bool value) {
    m_text += ',';
    append_json_string(m_text, key);
    m_text += value ? ":true" : ":false";
    return *this;
}

std::string record::line() const {
    return m_text + '}';
}

history_file::history_file(const std::string& path)
    : m_fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
    if (m_fd < 0) throw std::runtime_error("could not open history file " + path);
}

history_file::~history_file() noexcept {
    if (m_fd >= 0) ::close(m_fd);
}

void history_file::append(const record& entry) {
    const std::string text = entry.line() + '\n';
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(m_fd, text.data() + done, text.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw std::runtime_error("could not write history file");
        }
        done += static_cast<std::size_t>(n);
    }
}

} // namespace faults
