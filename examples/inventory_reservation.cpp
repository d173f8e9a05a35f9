// inventory_reservation.cpp -- reserve stock under a lock taken in the same
// transaction as the stock change.
//
// The lock "inventory:<sku>" is acquired inside the transaction that
// decrements the stock and records the reservation, so all three commit or
// roll back together. The lease then covers the slow part (here a simulated
// payment call); the confirmation is written only while the lease still
// holds (assert_holds pins it), and the stock row refuses writes carrying an
// older fencing token (dlock.enforce_fencing).
//
// Usage: inventory_reservation [SKU [QUANTITY]]   (connection from PG*)
// Exit status: 0 reserved and confirmed, 1 out of stock or lost the lease,
// 75 busy (try again later), 2 error.
#include <dlock/dlock.hpp>

#include <pqxx/pqxx>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

void create_tables(pqxx::connection& conn) {
    pqxx::work w{conn};
    w.exec("SELECT pg_advisory_xact_lock(hashtext('dlock examples setup'))");
    w.exec("CREATE TABLE IF NOT EXISTS example_inventory ("
           " sku text PRIMARY KEY, on_hand integer NOT NULL CHECK (on_hand >= 0),"
           " fencing_token bigint NOT NULL DEFAULT 0)");
    w.exec("CREATE OR REPLACE TRIGGER example_inventory_fencing BEFORE INSERT OR UPDATE ON example_inventory"
           " FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('fencing_token')");
    w.exec("CREATE TABLE IF NOT EXISTS example_reservations ("
           " id bigserial PRIMARY KEY, sku text NOT NULL, quantity integer NOT NULL,"
           " fencing_token bigint NOT NULL, confirmed boolean NOT NULL DEFAULT false)");
    w.exec("INSERT INTO example_inventory (sku, on_hand) VALUES ('sku-1', 1000000) ON CONFLICT DO NOTHING");
    w.commit();
}

} // namespace

int main(int argc, char** argv) {
    const std::string sku = argc > 1 ? argv[1] : "sku-1";
    const int quantity = argc > 2 ? std::stoi(argv[2]) : 1;
    try {
        pqxx::connection conn; // business connection, PG* environment
        create_tables(conn);
        dlock::client locks; // lock client, same server
        const std::string lock_name = "inventory:" + sku;
        dlock::lease_options options;
        options.ttl = 10s;

        // 1. Lock, stock change and reservation in one transaction.
        pqxx::work w{conn};
        const auto granted = locks.try_acquire(w, lock_name, options);
        if (!granted) {
            std::cout << "busy: another reservation of " << sku << " is in progress\n";
            return 75;
        }
        const auto stock = w.exec_params("UPDATE example_inventory SET on_hand = on_hand - $2, fencing_token = $3"
                                         " WHERE sku = $1 AND on_hand >= $2 RETURNING on_hand",
                                         sku, quantity, granted->fencing_token);
        if (stock.empty()) {
            w.abort(); // no reservation, and no lease either
            std::cout << "out of stock: " << sku << "\n";
            return 1;
        }
        const auto id = w.exec_params1("INSERT INTO example_reservations (sku, quantity, fencing_token)"
                                       " VALUES ($1, $2, $3) RETURNING id",
                                       sku, quantity, granted->fencing_token)[0]
                            .as<long long>();
        if (dlock::commit(w) == dlock::outcome::unknown) {
            // Neither success nor failure: look the reservation up before retrying.
            std::cout << "commit outcome unknown for reservation " << id << "\n";
            return 2;
        }

        // 2. The lease now lives on its own: kept alive, released at scope exit.
        dlock::lease lease = locks.adopt(*granted, options);
        std::this_thread::sleep_for(50ms); // the payment provider is called here

        // 3. Confirm only while the lease still holds.
        if (!lease.valid()) {
            std::cout << "lease lost before confirmation; reservation " << id << " stays unconfirmed\n";
            return 1;
        }
        pqxx::work confirm{conn};
        dlock::assert_holds(confirm, lock_name, lease.fencing_token());
        confirm.exec_params("UPDATE example_reservations SET confirmed = true WHERE id = $1", id);
        confirm.commit();
        std::cout << "reserved " << quantity << " x " << sku << " (reservation " << id << ", fencing token "
                  << lease.fencing_token() << ", " << stock[0][0].as<int>() << " left)\n";
        return 0;
    } catch (const dlock::not_held_error& e) {
        std::cout << "lease lost: " << e.subject() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "inventory_reservation: " << e.what() << "\n";
        return 2;
    }
}
