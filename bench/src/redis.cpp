// Thin RAII wrapper over hiredis; see redis.hpp.
#include "redis.hpp"

#include <sys/time.h>

namespace bench {

redis_conn::redis_conn(const std::string& host, int port) {
    struct timeval tv = {5, 0};
    m_ctx = redisConnectWithTimeout(host.c_str(), port, tv);
    if (m_ctx == nullptr || m_ctx->err != 0) {
        std::string msg = m_ctx ? m_ctx->errstr : "out of memory";
        if (m_ctx != nullptr) redisFree(m_ctx);
        throw redis_error("could not connect to redis: " + msg);
    }
}

redis_conn::~redis_conn() noexcept {
    redisFree(m_ctx);
}

redis_reply redis_conn::command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const auto& a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    auto* raw =
        static_cast<redisReply*>(redisCommandArgv(m_ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (raw == nullptr) throw redis_error(std::string("redis connection failed: ") + m_ctx->errstr);
    redis_reply reply(raw);
    if (reply->type == REDIS_REPLY_ERROR) throw redis_error("redis error: " + std::string(reply->str, reply->len));
    return reply;
}

} // namespace bench
