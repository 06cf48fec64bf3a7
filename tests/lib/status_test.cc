// lib/status.h: the result setup and configuration return. Ok by default, an error keeps its one
// line and its kind through copies and moves, and the functions that return it say ok or why in
// the same words as before.
#include <doctest/doctest.h>

#include <cerrno>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lib/status.h"
#include "lib/suboptions.h"

using namespace biofs;

TEST_CASE("status: the default is ok, with no message") {
  const Status s;
  CHECK(s.ok());
  CHECK(s.code() == Status::Code::ok);
  CHECK(s.message().empty());
}

TEST_CASE("status: each kind of error carries its line and its kind") {
  const struct {
    Status s;
    Status::Code code;
  } rows[] = {
      {Status::invalid_argument("qd=0: expected 1..65536"), Status::Code::invalid_argument},
      {Status::not_found("emu:/x: no such file"), Status::Code::not_found},
      {Status::io_error("write failed: Input/output error"), Status::Code::io_error},
      {Status::busy("/x is in use (mounted)"), Status::Code::busy},
  };
  for (const auto& r : rows) {
    CAPTURE(r.s.message());
    CHECK_FALSE(r.s.ok());
    CHECK(r.s.code() == r.code);
  }
  CHECK(rows[0].s.message() == "qd=0: expected 1..65536");
  CHECK(rows[3].s.message() == "/x is in use (mounted)");
}

TEST_CASE("status: a set-up step's -errno picks the kind, the line is the caller's") {
  CHECK(Status::from_errno(-EINVAL, "qd=0: expected 1..65536").code() == Status::Code::invalid_argument);
  CHECK(Status::from_errno(-ENOENT, "gone").code() == Status::Code::not_found);
  CHECK(Status::from_errno(-EBUSY, "held").code() == Status::Code::busy);
  CHECK(Status::from_errno(-ENOMEM, "hardware queue 0: Cannot allocate memory").code() == Status::Code::io_error);
  CHECK(Status::from_errno(-ENOSPC, "x").code() == Status::Code::io_error);
  CHECK(Status::from_errno(-EINVAL, "qd=0: expected 1..65536").message() == "qd=0: expected 1..65536");
}

TEST_CASE("status: copies and moves keep the message and the kind") {
  const std::string line = "device 'emu:/x,lba=7': lba=7: expected lba=512 or lba=4096";
  const Status a = Status::invalid_argument(line);
  Status b = a;  // copy
  CHECK(b.message() == line);
  CHECK(b.code() == Status::Code::invalid_argument);
  CHECK(a.message() == line);  // the original keeps its own
  Status c = std::move(b);  // move
  CHECK(c.message() == line);
  CHECK(c.code() == Status::Code::invalid_argument);
  Status d;
  d = c;  // copy-assign over an ok one
  CHECK_FALSE(d.ok());
  CHECK(d.message() == line);
  d = Status();  // and back to ok
  CHECK(d.ok());
  CHECK(d.message().empty());
  std::vector<Status> many(3, Status::busy("held"));
  many.push_back(Status::not_found("gone"));
  many.erase(many.begin());  // moves the rest down
  CHECK(many[0].message() == "held");
  CHECK(many[2].message() == "gone");
  CHECK(many[2].code() == Status::Code::not_found);
}

TEST_CASE("status: only ok() says whether it failed (no conversion to bool)") {
  CHECK_FALSE(std::is_convertible_v<Status, bool>);
  CHECK_FALSE(std::is_constructible_v<bool, Status>);
  CHECK(std::is_nothrow_move_constructible_v<Status>);
}

TEST_CASE("status: parse_suboptions says ok or names the option in one line") {
  bool flag = false;
  std::string seen;
  const std::vector<SubOption> table = {
      {"flag", SubOption::Takes::nothing, [&](std::string_view) { flag = true; return Status(); }},
      {"n", SubOption::Takes::value, [&](std::string_view v) {
         if (v != "1" && v != "2") return Status::invalid_argument("expected n=1 or n=2");
         seen = v;
         return Status();
       }},
  };
  CHECK(parse_suboptions("flag,n=2", table, "test:").ok());
  CHECK(flag);
  CHECK(seen == "2");
  const Status bad = parse_suboptions("n=3", table, "test:");
  CHECK(bad.code() == Status::Code::invalid_argument);
  CHECK(bad.message() == "n=3: expected n=1 or n=2");
  CHECK(parse_suboptions("flag=1", table, "test:").message() == "flag=1: takes no value");
  CHECK(parse_suboptions("n", table, "test:").message() == "n: needs a value");
  CHECK(parse_suboptions("what", table, "test:").message() == "what: unknown option (test: takes flag, n=)");
}
