#pragma once
// Everything routing offers, for callers that want one include.
#include "amqp/routing/filters.hpp"
#include "amqp/routing/names.hpp"
#include "amqp/wire/result.hpp"
#include "amqp/routing/subject.hpp"
#include "amqp/routing/topology.hpp"
