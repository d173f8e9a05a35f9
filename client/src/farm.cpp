// farm.cpp -- farm_client: one client per partition, each name sent to its own.
#include "dlock/farm.hpp"

#include <utility>

#include "dlock/errors.hpp"
#include "hashtext.hpp"

namespace dlock {

farm_client::farm_client(client_options options) : m_connection_strings{std::move(options.partitions)} {
    const std::size_t n = m_connection_strings.size();
    if (n == 0 || (n & (n - 1)) != 0)
        throw invalid_argument_error("invalid number of partitions: " + std::to_string(n) +
                                         "; client_options::partitions must list a power of two of them "
                                         "(1, 2, 4, ...), the farm's partitions in order",
                                     "partitions", "22023");
    options.partitions.clear();
    m_clients.reserve(n);
    for (const std::string& connection_string : m_connection_strings) {
        client_options one = options;
        one.connection_string = connection_string;
        m_clients.emplace_back(std::move(one));
    }
}

std::size_t farm_client::partition_count() const noexcept {
    return m_clients.size();
}

std::size_t farm_client::partition_of(std::string_view lock_name) const noexcept {
    // the proxy's int4 & (N - 1) keeps the same low bits as the unsigned value
    return internal::hashtext(lock_name) & (m_clients.size() - 1);
}

const std::string& farm_client::connection_string_of(std::string_view lock_name) const {
    return m_connection_strings[partition_of(lock_name)];
}

client& farm_client::partition(std::size_t index) {
    if (index >= m_clients.size())
        throw invalid_argument_error("partition " + std::to_string(index) + " is out of range: the farm has " +
                                         std::to_string(m_clients.size()) + " partitions",
                                     "partition", "22023");
    return m_clients[index];
}

client& farm_client::client_for(std::string_view lock_name) {
    return m_clients[partition_of(lock_name)];
}

std::size_t farm_client::partition_of_all(const std::vector<std::string>& lock_names) const {
    // the rule is the proxy's (dlock_farm.partition_of_all): one transaction, one partition
    if (lock_names.empty()) return 0;
    const std::size_t first = partition_of(lock_names.front());
    for (const std::string& name : lock_names) {
        const std::size_t part = partition_of(name);
        if (part != first)
            throw invalid_argument_error("lock_names fall on more than one partition: \"" + lock_names.front() +
                                             "\" is on partition " + std::to_string(first) + " and \"" + name +
                                             "\" on partition " + std::to_string(part) +
                                             "; take together only names of one partition, or one by one in a "
                                             "fixed order",
                                         name, "0A000");
    }
    return first;
}

std::optional<lease> farm_client::try_acquire(std::string_view lock_name, const lease_options& options) {
    return client_for(lock_name).try_acquire(lock_name, options);
}

lease farm_client::acquire(std::string_view lock_name, std::chrono::milliseconds wait, const lease_options& options) {
    return client_for(lock_name).acquire(lock_name, wait, options);
}

std::optional<lease> farm_client::try_acquire_shared(std::string_view lock_name, const lease_options& options) {
    return client_for(lock_name).try_acquire_shared(lock_name, options);
}

lease farm_client::acquire_shared(std::string_view lock_name, std::chrono::milliseconds wait,
                                  const lease_options& options) {
    return client_for(lock_name).acquire_shared(lock_name, wait, options);
}

std::optional<lease> farm_client::try_acquire_permit(std::string_view semaphore_name, int permits,
                                                     const lease_options& options) {
    return client_for(semaphore_name).try_acquire_permit(semaphore_name, permits, options);
}

lease farm_client::acquire_permit(std::string_view semaphore_name, int permits, std::chrono::milliseconds wait,
                                  const lease_options& options) {
    return client_for(semaphore_name).acquire_permit(semaphore_name, permits, wait, options);
}

std::optional<grant> farm_client::renew(std::string_view lock_name, std::string_view owner_token,
                                        std::chrono::milliseconds ttl) {
    return client_for(lock_name).renew(lock_name, owner_token, ttl);
}

outcome farm_client::release(std::string_view lock_name, std::string_view owner_token) noexcept {
    return m_clients[partition_of(lock_name)].release(lock_name, owner_token);
}

bool farm_client::force_release(std::string_view lock_name, std::string_view reason) {
    return client_for(lock_name).force_release(lock_name, reason);
}

std::optional<std::vector<lease>> farm_client::try_acquire_all(const std::vector<std::string>& lock_names,
                                                               const lease_options& options) {
    return m_clients[partition_of_all(lock_names)].try_acquire_all(lock_names, options);
}

std::vector<lease> farm_client::acquire_all(const std::vector<std::string>& lock_names,
                                            std::chrono::milliseconds wait, const lease_options& options) {
    return m_clients[partition_of_all(lock_names)].acquire_all(lock_names, wait, options);
}

} // namespace dlock
