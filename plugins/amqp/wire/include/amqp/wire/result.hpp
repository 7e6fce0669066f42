#pragma once
// wire::result<T>: a value, or the refusal that says in AMQP's vocabulary why there is none.
// The codec, the routing rules and the broker all say "no" this way.
#include "amqp/expected.hpp"
#include "amqp/wire/reply_code.hpp"

namespace amqp::wire {

template <class T>
using result = expected<T, refusal>;

}  // namespace amqp::wire
