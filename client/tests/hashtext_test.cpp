// The client's hashtext (src/hashtext.cpp), by which dlock::farm_client routes
// a name to its partition, gives the server's hashtext() for every name: every
// length from 0 to 64 bytes (each tail length, each block boundary), UTF-8,
// long names and random ones. Built twice: hashtext_planted_test compiles the
// hash with a planted off-by-one (DLOCK_PLANT_HASH_BUG), and
// tests/suites/30-client.sh requires this comparison to fail there.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "hashtext.hpp"

namespace {

std::vector<std::string> names() {
    std::vector<std::string> out;
    for (std::size_t len = 0; len <= 64; ++len) {
        std::string name;
        for (std::size_t i = 0; i < len; ++i) name += static_cast<char>('a' + (i * 7 + len) % 26);
        out.push_back(name);
    }
    for (const char* s : {"r1", "fz", "eq-m1", "eq-m2", "orders/42", "ключ", "锁-レース", "😀 lock 😀",
                          "Ωmega\u00e9\u00e8", "tab\there", "quote'\"\\"})
        out.emplace_back(s);
    out.emplace_back(1000, 'x');
    out.emplace_back(std::string(4095, 'y') + "\u00e9");
    // random names: ASCII 1..127 and two-, three- and four-byte UTF-8 code points
    std::mt19937 rng{20261206};
    const std::vector<std::string> pieces = {"\u00df", "\u0416", "\u4e2d", "\U0001F512", "-", "_", "/"};
    for (int i = 0; i < 300; ++i) {
        std::string name;
        const int len = static_cast<int>(rng() % 40);
        for (int j = 0; j < len; ++j) {
            if (rng() % 5 == 0)
                name += pieces[rng() % pieces.size()];
            else
                name += static_cast<char>(1 + rng() % 127);
        }
        out.push_back(name);
    }
    return out;
}

TEST(hashtext, equals_the_servers_hashtext) {
    pqxx::connection conn;
    pqxx::read_transaction tx{conn};
    ASSERT_EQ(tx.exec1("SHOW server_encoding")[0].as<std::string>(), "UTF8");
    int compared = 0;
    for (const std::string& name : names()) {
        const auto server = tx.exec_params1("SELECT hashtext($1)", name)[0].as<std::int32_t>();
        EXPECT_EQ(static_cast<std::int32_t>(dlock::internal::hashtext(name)), server)
            << "name of " << name.size() << " bytes: \"" << name << "\"";
        ++compared;
    }
    EXPECT_GE(compared, 370);
}

} // namespace
