// dlock/dlock.hpp -- everything of the pg_dlock C++ client.
#pragma once

#include "dlock/client.hpp"
#include "dlock/election.hpp"
#include "dlock/errors.hpp"
#include "dlock/farm.hpp"
#include "dlock/json.hpp"
#include "dlock/lease.hpp"
#include "dlock/listener.hpp"
#include "dlock/metrics.hpp"
#include "dlock/options.hpp"
#include "dlock/transaction.hpp"
