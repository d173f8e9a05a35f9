// Thin RAII wrapper over hiredis for the benchmark driver: one blocking
// connection per thread, commands passed as argument vectors.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

class redis_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct reply_deleter {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using redis_reply = std::unique_ptr<redisReply, reply_deleter>;

class redis_conn {
public:
    redis_conn(const std::string& host, int port);
    redis_conn(const redis_conn&) = delete;
    redis_conn& operator=(const redis_conn&) = delete;
    redis_conn(redis_conn&&) = delete;
    redis_conn& operator=(redis_conn&&) = delete;
    ~redis_conn() noexcept;

    // Sends one command; throws on connection errors and error replies.
    redis_reply command(const std::vector<std::string>& args);

private:
    redisContext* m_ctx;
};

} // namespace bench
