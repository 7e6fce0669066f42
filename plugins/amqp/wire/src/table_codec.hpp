#pragma once
// Field-table decoding on a reader, shared by method arguments, properties and decode_table.
#include "amqp/wire/field_table.hpp"
#include "amqp/wire/reply_code.hpp"
#include "reader.hpp"

namespace amqp::wire {

// Reads a u32-length-prefixed table from `r`. On failure returns false and sets `error`
// (502 SYNTAX_ERROR with a sentence naming the cause); `r` is then unusable.
bool read_table(reader& r, field_table& table, refusal& error);

}  // namespace amqp::wire
