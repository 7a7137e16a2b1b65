// The tuning database (src/tuner/database.h): round trip, keyed lookup, resume, refusal of
// foreign or damaged files, error paths, crash safety under kill -9, JSONL export.
#include "tuner/database.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace tac::tuner {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class TunerDatabase : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "tac_db_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::unique_ptr<Database> open_ok(const std::string& path) {
    auto db = Database::open(path);
    EXPECT_TRUE(db.is_ok()) << db.status().to_string();
    return db.is_ok() ? std::move(db).value() : nullptr;
  }

  std::string dir_;
};

CandidateRecord sample(const std::string& route, int i = 0) {
  CandidateRecord r;
  r.model_hash = "m-abc123";
  r.device = "cpu:x86_64:avx512:16";
  r.tool_version = "0.4.0+g1234";
  r.route = route;
  r.status = i % 3 == 0 ? "ok" : "build_failed";
  r.reason = i % 3 == 0 ? "" : "invalid_route: knob 'x' out of domain";
  r.strategy = "tpe";
  r.seed = 42 + static_cast<uint64_t>(i);
  r.build_ms = 12.5 + i;
  r.metrics_json = R"({"out0": {"linf": 1e-06, "cos": 0.9999}})";
  r.median_ms = 3.25 + i;
  r.p10_ms = 3.0;
  r.p90_ms = 3.5;
  r.cv = 0.015;
  r.runs = 50 + i;
  r.threads = 4;
  r.unix_time = 1.7e9 + i;
  r.evaluator = i % 2 ? "rank " + std::to_string(i) + " (host-a)" : "";
  return r;
}

void expect_same(const CandidateRecord& a, const CandidateRecord& b) {
  EXPECT_EQ(a.model_hash, b.model_hash);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.tool_version, b.tool_version);
  EXPECT_EQ(a.route, b.route);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.metrics_json, b.metrics_json);
  EXPECT_EQ(a.runs, b.runs);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.evaluator, b.evaluator);
  // Doubles round-trip bit for bit; NaN stays NaN.
  auto same = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  EXPECT_PRED2(same, a.build_ms, b.build_ms);
  EXPECT_PRED2(same, a.median_ms, b.median_ms);
  EXPECT_PRED2(same, a.p10_ms, b.p10_ms);
  EXPECT_PRED2(same, a.p90_ms, b.p90_ms);
  EXPECT_PRED2(same, a.cv, b.cv);
  EXPECT_PRED2(same, a.unix_time, b.unix_time);
}

// Runs a fixed query on the raw file and returns the first column of the first row.
std::string raw_query(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  std::string out = "<open failed>";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
      out = std::string("<prepare failed: ") + sqlite3_errmsg(db) + ">";
    } else if (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      out = t ? reinterpret_cast<const char*>(t) : "";
    } else {
      out = std::string("<no row: ") + sqlite3_errmsg(db) + ">";
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

TEST_F(TunerDatabase, RoundTripsEveryField) {
  auto db = open_ok(file("t.db"));
  ASSERT_TRUE(db);
  CandidateRecord a = sample("fuse.conv_act=off tactic.conv_17=winograd_f4");
  // Awkward values: every byte class, the extremes of each numeric type, NaN.
  a.reason = std::string("quote \" backslash \\ newline \n tab \t nul ") + '\0' + " end \x01 \xC3\xA9 \xFF";
  a.seed = std::numeric_limits<uint64_t>::max();
  a.build_ms = std::nan("");
  a.median_ms = 0.1 + 0.2;
  a.p10_ms = -0.0;
  a.p90_ms = std::numeric_limits<double>::infinity();
  a.cv = std::numeric_limits<double>::denorm_min();
  a.runs = std::numeric_limits<int>::max();
  a.threads = std::numeric_limits<int>::min();
  a.unix_time = 1712345678.123456;
  CandidateRecord b = sample("");  // the default route
  b.seed = 0;

  auto ida = db->insert(a);
  ASSERT_TRUE(ida.is_ok()) << ida.status().to_string();
  auto idb = db->insert(b);
  ASSERT_TRUE(idb.is_ok()) << idb.status().to_string();
  EXPECT_GT(*idb, *ida);

  auto got = db->find(a.model_hash, a.device, a.tool_version, a.route);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->id, *ida);
  expect_same(**got, a);
  // SQLite stores an integral REAL as an integer, so -0.0 reads back as +0.0 (equal, unsigned).
  EXPECT_EQ((*got)->p10_ms, 0.0);

  auto every = db->everything();
  ASSERT_TRUE(every.is_ok());
  ASSERT_EQ(every->size(), 2u);
  EXPECT_EQ((*every)[0].id, *ida);
  EXPECT_EQ((*every)[1].id, *idb);
  expect_same((*every)[0], a);
  expect_same((*every)[1], b);
}

TEST_F(TunerDatabase, FindsByFullKeyOnly) {
  auto db = open_ok(file("t.db"));
  ASSERT_TRUE(db);
  CandidateRecord r = sample("memory.planner=no_reuse");
  ASSERT_TRUE(db->insert(r).is_ok());
  CandidateRecord other_device = r;
  other_device.device = "cpu:arm64:neon:8";
  other_device.median_ms = 99;
  ASSERT_TRUE(db->insert(other_device).is_ok());

  auto hit = db->find(r.model_hash, r.device, r.tool_version, r.route);
  ASSERT_TRUE(hit.is_ok() && hit->has_value());
  EXPECT_EQ((*hit)->median_ms, r.median_ms);
  auto hit2 = db->find(r.model_hash, other_device.device, r.tool_version, r.route);
  ASSERT_TRUE(hit2.is_ok() && hit2->has_value());
  EXPECT_EQ((*hit2)->median_ms, 99);

  // Another tool version, model, device or route: never matched.
  for (auto miss : {db->find(r.model_hash, r.device, "0.5.0", r.route), db->find("m-other", r.device, r.tool_version, r.route),
                    db->find(r.model_hash, "cuda:h200", r.tool_version, r.route),
                    db->find(r.model_hash, r.device, r.tool_version, "memory.planner=greedy_by_size"),
                    db->find(r.model_hash, r.device, r.tool_version, "")}) {
    ASSERT_TRUE(miss.is_ok()) << miss.status().to_string();
    EXPECT_FALSE(miss->has_value());
  }
  auto none = db->all(r.model_hash, r.device, "0.5.0");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(TunerDatabase, AllIsInInsertionOrderAndFindReturnsTheLatest) {
  auto db = open_ok(file("t.db"));
  ASSERT_TRUE(db);
  // Routes inserted out of lexical order, interleaved with another device's records.
  std::vector<std::string> routes = {"z=1", "a=1", "m=1", "b=1"};
  std::vector<int64_t> ids;
  for (size_t i = 0; i < routes.size(); ++i) {
    auto id = db->insert(sample(routes[i], static_cast<int>(i)));
    ASSERT_TRUE(id.is_ok());
    ids.push_back(*id);
    CandidateRecord noise = sample(routes[i]);
    noise.device = "other";
    ASSERT_TRUE(db->insert(noise).is_ok());
  }
  auto all = db->all("m-abc123", "cpu:x86_64:avx512:16", "0.4.0+g1234");
  ASSERT_TRUE(all.is_ok());
  ASSERT_EQ(all->size(), routes.size());
  for (size_t i = 0; i < routes.size(); ++i) {
    EXPECT_EQ((*all)[i].route, routes[i]);
    EXPECT_EQ((*all)[i].id, ids[i]);
  }
  auto every = db->everything();
  ASSERT_TRUE(every.is_ok());
  ASSERT_EQ(every->size(), 2 * routes.size());
  for (size_t i = 1; i < every->size(); ++i) EXPECT_LT((*every)[i - 1].id, (*every)[i].id);

  // A re-measured route: find returns the most recent record.
  CandidateRecord again = sample("a=1");
  again.median_ms = 1.0;
  auto id = db->insert(again);
  ASSERT_TRUE(id.is_ok());
  auto got = db->find(again.model_hash, again.device, again.tool_version, "a=1");
  ASSERT_TRUE(got.is_ok() && got->has_value());
  EXPECT_EQ((*got)->id, *id);
  EXPECT_EQ((*got)->median_ms, 1.0);
}

TEST_F(TunerDatabase, ResumesAfterCloseAndReopen) {
  const std::string path = file("resume.db");
  std::vector<int64_t> ids;
  {
    auto db = open_ok(path);
    ASSERT_TRUE(db);
    for (int i = 0; i < 5; ++i) {
      auto id = db->insert(sample("k=" + std::to_string(i), i));
      ASSERT_TRUE(id.is_ok());
      ids.push_back(*id);
    }
  }
  EXPECT_EQ(raw_query(path, "PRAGMA journal_mode"), "wal");
  {
    auto db = open_ok(path);
    ASSERT_TRUE(db);
    auto all = db->all("m-abc123", "cpu:x86_64:avx512:16", "0.4.0+g1234");
    ASSERT_TRUE(all.is_ok());
    ASSERT_EQ(all->size(), 5u);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ((*all)[i].id, ids[i]);
      expect_same((*all)[i], sample("k=" + std::to_string(i), i));
    }
    auto found = db->find("m-abc123", "cpu:x86_64:avx512:16", "0.4.0+g1234", "k=3");
    ASSERT_TRUE(found.is_ok() && found->has_value());
    // New ids continue after the old ones.
    auto id = db->insert(sample("k=5", 5));
    ASSERT_TRUE(id.is_ok());
    EXPECT_GT(*id, ids.back());
  }
}

TEST_F(TunerDatabase, TwoConnectionsSeeEachOthersInserts) {
  const std::string path = file("shared.db");
  auto a = open_ok(path);
  auto b = open_ok(path);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->insert(sample("x=1")).is_ok());
  ASSERT_TRUE(b->insert(sample("x=2")).is_ok());
  auto all = a->everything();
  ASSERT_TRUE(all.is_ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].route, "x=2");
}

TEST_F(TunerDatabase, RefusesRandomBytes) {
  const std::string path = file("random.db");
  std::mt19937 rng(7);
  std::string bytes(64 * 1024, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  write_file(path, bytes);
  auto db = Database::open(path);
  ASSERT_FALSE(db.is_ok());
  EXPECT_NE(db.status().message().find(path), std::string::npos) << db.status().to_string();
  EXPECT_NE(db.status().message().find("not a Tactician tuning database"), std::string::npos) << db.status().to_string();
  // Refused, not modified.
  std::ifstream f(path, std::ios::binary);
  std::string after((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, bytes);
}

TEST_F(TunerDatabase, RefusesATextFile) {
  const std::string path = file("notes.txt");
  write_file(path, "route,median_ms\nfuse.conv_act=off,3.2\n");
  auto db = Database::open(path);
  ASSERT_FALSE(db.is_ok());
  EXPECT_NE(db.status().message().find(path), std::string::npos) << db.status().to_string();
  EXPECT_NE(db.status().message().find("not a Tactician tuning database"), std::string::npos) << db.status().to_string();
}

TEST_F(TunerDatabase, RefusesAnotherApplicationsSqliteFile) {
  const std::string path = file("other.sqlite");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE candidates (name TEXT); INSERT INTO candidates VALUES ('x');", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto db = Database::open(path);
  ASSERT_FALSE(db.is_ok());
  EXPECT_NE(db.status().message().find(path), std::string::npos) << db.status().to_string();
  EXPECT_NE(db.status().message().find("not a Tactician tuning database"), std::string::npos) << db.status().to_string();
  // Untouched: still the other application's journal mode and data.
  EXPECT_EQ(raw_query(path, "PRAGMA journal_mode"), "delete");
  EXPECT_EQ(raw_query(path, "SELECT name FROM candidates"), "x");
}

TEST_F(TunerDatabase, RefusesAnotherSchemaVersion) {
  const std::string path = file("v2.db");
  { ASSERT_TRUE(open_ok(path)); }
  EXPECT_EQ(raw_query(path, "UPDATE tactician_schema SET version = 2 RETURNING version"), "2");
  auto db = Database::open(path);
  ASSERT_FALSE(db.is_ok());
  EXPECT_NE(db.status().message().find(path), std::string::npos) << db.status().to_string();
  EXPECT_NE(db.status().message().find("schema version 2"), std::string::npos) << db.status().to_string();
}

TEST_F(TunerDatabase, FilesWithoutTheEvaluatorColumnGetItOnOpen) {
  const std::string path = file("old.db");
  CandidateRecord old = sample("memory.inplace=off", 0);
  {
    auto db = open_ok(path);
    ASSERT_TRUE(db);
    ASSERT_TRUE(db->insert(old).is_ok());
  }
  // The layout before distributed tuning: no evaluator column.
  raw_query(path, "ALTER TABLE candidates DROP COLUMN evaluator");
  ASSERT_EQ(raw_query(path, "SELECT count(*) FROM pragma_table_info('candidates') WHERE name = 'evaluator'"), "0");
  auto db = open_ok(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(raw_query(path, "SELECT count(*) FROM pragma_table_info('candidates') WHERE name = 'evaluator'"), "1");
  CandidateRecord fresh = sample("memory.inplace=on", 1);
  ASSERT_EQ(fresh.evaluator, "rank 1 (host-a)");
  ASSERT_TRUE(db->insert(fresh).is_ok());
  auto every = db->everything();
  ASSERT_TRUE(every.is_ok());
  ASSERT_EQ(every->size(), 2u);
  expect_same((*every)[0], old);  // evaluator "" for the old row
  expect_same((*every)[1], fresh);
}

TEST_F(TunerDatabase, MissingParentIsAnError) {
  const std::string path = file("no/such/dir/t.db");
  auto db = Database::open(path);
  ASSERT_FALSE(db.is_ok());
  EXPECT_EQ(db.status().kind(), ErrorKind::io_error);
  EXPECT_NE(db.status().message().find(path), std::string::npos) << db.status().to_string();
  EXPECT_NE(db.status().message().find("does not exist"), std::string::npos) << db.status().to_string();
  EXPECT_FALSE(fs::exists(file("no")));

  // A parent that is a regular file.
  write_file(file("plain"), "x");
  auto db2 = Database::open(file("plain/t.db"));
  ASSERT_FALSE(db2.is_ok());
  EXPECT_NE(db2.status().message().find(file("plain/t.db")), std::string::npos) << db2.status().to_string();
  EXPECT_NE(db2.status().message().find("is not a directory"), std::string::npos) << db2.status().to_string();
}

TEST_F(TunerDatabase, ReadOnlyDirectoryIsAnError) {
  const std::string ro = file("ro");
  ASSERT_EQ(mkdir(ro.c_str(), 0555), 0);
  std::string path = ro + "/t.db";
  // Root ignores directory permissions: then use a directory no one can create files in.
  if (access(ro.c_str(), W_OK) == 0) path = "/proc/self/tactician_test.db";
  auto db = Database::open(path);
  ASSERT_FALSE(db.is_ok());
  EXPECT_EQ(db.status().kind(), ErrorKind::io_error);
  EXPECT_NE(db.status().message().find(path), std::string::npos) << db.status().to_string();
  EXPECT_NE(db.status().message().find("is not writable"), std::string::npos) << db.status().to_string();
}

TEST_F(TunerDatabase, EmptyPathIsAnError) {
  auto db = Database::open("");
  ASSERT_FALSE(db.is_ok());
  EXPECT_EQ(db.status().kind(), ErrorKind::invalid_argument);
}

// A child inserts in a loop and reports each id on a pipe once insert() has returned; it is
// killed with SIGKILL at an arbitrary point. Every reported id must be in the file, at most
// one unreported record (the one in flight) may be, and the file must pass integrity_check.
// Three rounds on the same file also exercise recovery of a WAL left by a killed writer.
TEST_F(TunerDatabase, KillNineLosesNothingCommitted) {
  const std::string path = file("crash.db");
  std::set<int64_t> reported;
  std::mt19937 rng(1234);
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      auto db = Database::open(path);
      if (!db.is_ok()) _exit(2);
      for (int i = 0;; ++i) {
        auto id = (*db)->insert(sample("round=" + std::to_string(round) + " i=" + std::to_string(i), i));
        if (!id.is_ok()) _exit(3);
        int64_t v = *id;
        if (write(fds[1], &v, sizeof v) != static_cast<ssize_t>(sizeof v)) _exit(4);
      }
    }
    close(fds[1]);
    // Let it commit a random number of records, then kill it wherever it is.
    const int wait_for = 20 + static_cast<int>(rng() % 60);
    int64_t v;
    int got = 0;
    while (got < wait_for && read(fds[0], &v, sizeof v) == static_cast<ssize_t>(sizeof v)) {
      reported.insert(v);
      ++got;
    }
    usleep(rng() % 3000);
    kill(pid, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited on its own with status " << WEXITSTATUS(wstatus);
    EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);
    // Drain what the child reported before it died.
    while (read(fds[0], &v, sizeof v) == static_cast<ssize_t>(sizeof v)) reported.insert(v);
    close(fds[0]);
    ASSERT_GE(got, wait_for);

    EXPECT_EQ(raw_query(path, "PRAGMA integrity_check"), "ok");
    auto db = open_ok(path);
    ASSERT_TRUE(db);
    auto every = db->everything();
    ASSERT_TRUE(every.is_ok()) << every.status().to_string();
    std::set<int64_t> present;
    for (const CandidateRecord& r : *every) present.insert(r.id);
    for (int64_t id : reported) EXPECT_TRUE(present.count(id)) << "committed id " << id << " lost in round " << round;
    size_t unreported = 0;
    for (int64_t id : present) unreported += reported.count(id) == 0;
    EXPECT_LE(unreported, 1u) << "round " << round;
    // An unreported in-flight record is complete, never half written.
    for (const CandidateRecord& r : *every) {
      if (!reported.count(r.id)) {
        EXPECT_EQ(r.route.rfind("round=" + std::to_string(round), 0), 0u);
      }
    }
    // Keep the reported set exact for the next round.
    for (int64_t id : present) reported.insert(id);
  }
}

TEST_F(TunerDatabase, ExportsOneJsonObjectPerLine) {
  auto db = open_ok(file("t.db"));
  ASSERT_TRUE(db);
  CandidateRecord a = sample("tactic.conv_1=\"im2col\"\\x");
  a.reason = std::string("line1\nline2\r\t\x01 \xC3\xA9 bad \xFF\xFE end ") + '\0';
  a.metrics_json = "{\n  \"out0\": {\"linf\": 0.5, \"cos\": 1}\n}\n";  // multi-line, valid
  a.build_ms = std::nan("");
  a.p90_ms = std::numeric_limits<double>::infinity();
  CandidateRecord b = sample("b=1", 1);
  b.metrics_json = "{not json";
  CandidateRecord c = sample("c=1", 2);
  c.metrics_json = "";
  ASSERT_TRUE(db->insert(a).is_ok());
  ASSERT_TRUE(db->insert(b).is_ok());
  ASSERT_TRUE(db->insert(c).is_ok());

  const std::string out = file("export.jsonl");
  Status s = db->export_jsonl(out);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::ifstream f(out, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  for (const std::string& l : lines) {
    ASSERT_FALSE(l.empty());
    EXPECT_EQ(l.front(), '{');
    EXPECT_EQ(l.back(), '}');
    EXPECT_EQ(l.find('\r'), std::string::npos);
    EXPECT_EQ(l.find('\0'), std::string::npos);
  }
  EXPECT_NE(lines[0].find(R"("metrics":{"out0":{"linf":0.5,"cos":1}})"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(R"("build_ms":null)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(R"("route":"tactic.conv_1=\"im2col\"\\x")"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(R"("metrics":"{not json")"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find(R"("metrics":null)"), std::string::npos) << lines[2];

  // A real JSON parser, where the machine has one.
  if (access("/usr/bin/python3", X_OK) == 0) {
    const std::string check = file("check.py");
    write_file(check,
               "import json, sys\n"
               "rows = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8')]\n"
               "assert len(rows) == 3, rows\n"
               "assert rows[0]['route'] == 'tactic.conv_1=\"im2col\"\\\\x', rows[0]['route']\n"
               "assert rows[0]['reason'] == 'line1\\nline2\\r\\t\\x01 \\u00e9 bad \\ufffd\\ufffd end \\x00', "
               "repr(rows[0]['reason'])\n"
               "assert rows[0]['metrics'] == {'out0': {'linf': 0.5, 'cos': 1}}, rows[0]['metrics']\n"
               "assert rows[0]['build_ms'] is None and rows[0]['p90_ms'] is None\n"
               "assert rows[1]['metrics'] == '{not json' and rows[2]['metrics'] is None\n"
               "assert rows[1]['seed'] == 43 and rows[1]['runs'] == 51 and rows[1]['median_ms'] == 4.25\n"
               "assert [r['id'] for r in rows] == sorted(r['id'] for r in rows)\n");
    const std::string cmd = "/usr/bin/python3 " + check + " " + out;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

// nlohmann writes nested values recursively: metrics nested deeper than 256 levels (a row edited by
// hand) are exported as their text, so that no row can overflow the stack.
TEST_F(TunerDatabase, ExportKeepsDeeplyNestedMetricsAsText) {
  auto db = open_ok(file("t.db"));
  ASSERT_TRUE(db);
  CandidateRecord shallow = sample("a=1");
  shallow.metrics_json = std::string(200, '[') + std::string(200, ']');
  CandidateRecord deep = sample("b=1", 1);
  deep.metrics_json = std::string(1000000, '[') + std::string(1000000, ']');
  ASSERT_TRUE(db->insert(shallow).is_ok());
  ASSERT_TRUE(db->insert(deep).is_ok());
  const std::string out = file("export.jsonl");
  ASSERT_TRUE(db->export_jsonl(out).is_ok());
  std::ifstream f(out, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("\"metrics\":" + shallow.metrics_json + ","), std::string::npos);
  EXPECT_NE(lines[1].find("\"metrics\":\"" + deep.metrics_json + "\","), std::string::npos);
}

TEST_F(TunerDatabase, ExportToAnUnwritablePathIsAnError) {
  auto db = open_ok(file("t.db"));
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->insert(sample("a=1")).is_ok());
  const std::string out = file("missing/dir/export.jsonl");
  Status s = db->export_jsonl(out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::io_error);
  EXPECT_NE(s.message().find(out), std::string::npos) << s.to_string();
}

// ---- Reading back hostile rows (issue 30): every value read is input ----

// Runs fixed SQL on the raw file (an edit made behind the tuner's back, as `sqlite3` would).
void raw_exec(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST_F(TunerDatabase, AColumnHoldingWhatInsertNeverWritesIsNamed) {
  const std::string path = file("t.db");
  {
    auto db = open_ok(path);
    ASSERT_TRUE(db);
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(db->insert(sample("k=" + std::to_string(i), i)).is_ok());
  }
  raw_exec(path,
           "UPDATE candidates SET median_ms = 'fast' WHERE id = 2;"
           "UPDATE candidates SET runs = 1099511627776 WHERE id = 3;"
           "UPDATE candidates SET route = x'00ff' WHERE id = 4;"
           "UPDATE candidates SET seed = 'x' WHERE id = 5;");
  auto db = open_ok(path);
  ASSERT_TRUE(db);
  // Without a place to put them, the first bad row is the error, naming the file, row and column.
  auto strict = db->everything();
  ASSERT_FALSE(strict.is_ok());
  EXPECT_EQ(strict.status().message(),
            path + ": row 2 (route 'k=1'): column 'median_ms' holds text 'fast', not a number");
  // With one, the bad rows are left out and described; the others come back intact.
  std::vector<std::string> skipped;
  auto lenient = db->everything(&skipped);
  ASSERT_TRUE(lenient.is_ok()) << lenient.status().to_string();
  ASSERT_EQ(lenient->size(), 2u);
  EXPECT_EQ((*lenient)[0].route, "k=0");
  EXPECT_EQ((*lenient)[1].route, "k=5");
  ASSERT_EQ(skipped.size(), 4u);
  EXPECT_EQ(skipped[1], path + ": row 3 (route 'k=2'): column 'runs' holds 1099511627776, out of range [-2147483648, 2147483647]");
  EXPECT_EQ(skipped[2], path + ": row 4 (route '\\x00\xff'): column 'route' holds a blob of 2 bytes, not text");
  EXPECT_EQ(skipped[3], path + ": row 5 (route 'k=4'): column 'seed' holds text 'x', not an integer");
  auto found = db->find("m-abc123", "cpu:x86_64:avx512:16", "0.4.0+g1234", "k=1");
  ASSERT_FALSE(found.is_ok());
  EXPECT_NE(found.status().message().find("row 2 (route 'k=1')"), std::string::npos) << found.status().to_string();
  std::vector<std::string> export_skipped;
  ASSERT_TRUE(db->export_jsonl(file("e.jsonl"), &export_skipped).is_ok());
  EXPECT_EQ(export_skipped.size(), 4u);
  EXPECT_FALSE(db->export_jsonl(file("e2.jsonl")).is_ok());
}

TEST_F(TunerDatabase, ValidateCandidateAcceptsWhatTheTunerWritesOnly) {
  CandidateRecord good = sample("tactic.conv_1=im2col threads=4");
  good.id = 7;
  good.metrics_json = R"([{"linf": 0, "l1": 1e-07, "l2": null, "cos": 1, "l0": 0, "finite": true}])";
  EXPECT_TRUE(validate_candidate(good).is_ok()) << validate_candidate(good).to_string();
  CandidateRecord failed = good;
  failed.status = "crashed";
  failed.median_ms = failed.p10_ms = failed.p90_ms = failed.cv = std::nan("");
  failed.runs = 0;
  failed.metrics_json = "[]";
  EXPECT_TRUE(validate_candidate(failed).is_ok()) << validate_candidate(failed).to_string();
  failed.metrics_json = "";
  EXPECT_TRUE(validate_candidate(failed).is_ok()) << validate_candidate(failed).to_string();

  auto why = [&](auto edit) {
    CandidateRecord r = good;
    edit(r);
    Status s = validate_candidate(r);
    return s.is_ok() ? std::string("<accepted>") : s.message();
  };
  EXPECT_EQ(why([](CandidateRecord& r) { r.route = "threadsX"; }), "route: 'threadsX' is not of the form knob=value");
  EXPECT_EQ(why([](CandidateRecord& r) { r.route = "a=b c"; }), "route: 'c' is not of the form knob=value");
  EXPECT_EQ(why([](CandidateRecord& r) { r.route = "threads=4  a=1"; }),
            "route is not in the canonical form the tuner writes ('a=1 threads=4')");
  EXPECT_EQ(why([](CandidateRecord& r) { r.status = "great"; }),
            "unknown status 'great' (ok, rejected, build_failed, run_failed, crashed or timeout)");
  EXPECT_EQ(why([](CandidateRecord& r) { r.median_ms = std::nan(""); }), "median_ms is nan (a time or cv is finite and not negative)");
  EXPECT_EQ(why([](CandidateRecord& r) { r.median_ms = 0; }), "an ok candidate with median_ms 0.000000");
  EXPECT_EQ(why([](CandidateRecord& r) { r.p90_ms = -1; }), "p90_ms is -1.000000 (a time or cv is finite and not negative)");
  EXPECT_EQ(why([](CandidateRecord& r) { r.cv = INFINITY; }), "cv is inf (a time or cv is finite and not negative)");
  EXPECT_EQ(why([](CandidateRecord& r) { r.runs = 0; }), "runs is 0 for an ok candidate");
  EXPECT_EQ(why([](CandidateRecord& r) { r.threads = 0; }), "threads is 0");
  EXPECT_EQ(why([](CandidateRecord& r) { r.unix_time = -5; }), "unix_time is -5.000000");
  EXPECT_EQ(why([](CandidateRecord& r) { r.metrics_json = "{not json"; }),
            "metrics JSON at byte 2: syntax error while parsing object key - invalid literal; last read: '{no'; expected "
            "string literal");
  EXPECT_EQ(why([](CandidateRecord& r) { r.metrics_json = R"([{"l2": 0.1, "note": "\"l2\": 5"}])"; }),
            "metrics JSON, output 0: unknown metric 'note' (linf, l1, l2, cos, l0, finite)");

  std::vector<std::string> skipped;
  CandidateRecord bad = good;
  bad.id = 8;
  bad.route = std::string("x\n=1");
  auto kept = usable_candidates({good, bad}, "t.db", skipped);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].id, 7);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0], "t.db: row 8 (route 'x\\x0A=1'): route: 'x' is not of the form knob=value");
}

TEST_F(TunerDatabase, ReadOnlyNeverCreatesOrChangesAFile) {
  const std::string missing = file("missing.db");
  auto db = Database::open(missing, Database::Mode::read_only);
  ASSERT_FALSE(db.is_ok());
  EXPECT_EQ(db.status().kind(), ErrorKind::io_error);
  EXPECT_EQ(db.status().message(), missing + ": no such tuning database");
  EXPECT_FALSE(fs::exists(missing));
  EXPECT_FALSE(fs::exists(missing + "-wal"));

  write_file(file("empty.db"), "");
  auto empty = Database::open(file("empty.db"), Database::Mode::read_only);
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("the file is empty"), std::string::npos) << empty.status().to_string();
  EXPECT_EQ(fs::file_size(file("empty.db")), 0u);

  {
    auto w = open_ok(file("t.db"));
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->insert(sample("a=1")).is_ok());
  }
  chmod(file("t.db").c_str(), 0444);
  auto r = Database::open(file("t.db"), Database::Mode::read_only);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto all = (*r)->everything();
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  EXPECT_EQ(all->size(), 1u);
  EXPECT_FALSE((*r)->insert(sample("b=1")).is_ok());
}

TEST_F(TunerDatabase, ReadOnlyReadsAFileOfTheFirstLayoutAsItIs) {
  const std::string path = file("old.db");
  {
    auto db = open_ok(path);
    ASSERT_TRUE(db);
    ASSERT_TRUE(db->insert(sample("a=1")).is_ok());
  }
  raw_exec(path, "DROP TABLE measurements; ALTER TABLE candidates DROP COLUMN evaluator;");
  auto db = Database::open(path, Database::Mode::read_only);
  ASSERT_TRUE(db.is_ok()) << db.status().to_string();
  auto all = (*db)->everything();
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].evaluator, "");
  auto ms = (*db)->measurements();
  ASSERT_TRUE(ms.is_ok()) << ms.status().to_string();
  EXPECT_TRUE(ms->empty());
  EXPECT_EQ(raw_query(path, "SELECT count(*) FROM pragma_table_info('candidates') WHERE name = 'evaluator'"), "0");
}

}  // namespace
}  // namespace tac::tuner
