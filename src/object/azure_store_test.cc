// AzureStore: Shared Key signing and SAS tokens against vectors made by an independent
// implementation (Python's hmac, following Azure's documentation), URL and XML parsing,
// credential checks, retries and listing cost against a scripted server
// (tiny_server_test.h), and authentication, container creation and failures against
// Azurite (TIERFS_TEST_AZURE_ENDPOINT, ..._ACCOUNT, ..._KEY; skipped when unset). What every
// store must do is in store_conformance_test.cc.
#include "object/azure_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <regex>

#include "common/base64.h"
#include "object/azure_sign.h"
#include "object/azure_test_sas.h"
#include "object/azure_xml.h"
#include "object/http_client.h"
#include "object/tiny_server_test.h"

namespace tierfs {
namespace {

// Azurite's well-known development key (public: the same in every Azurite).
constexpr char kDevKey[] = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string RandomName() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---------------------------------------------------------------- signing

// The expected strings and signatures were computed once by a separate Python
// implementation of the Shared Key scheme (hmac, hashlib, base64) with Azurite's key.
TEST(AzureSign, SharedKeyMatchesAnIndependentImplementation) {
  const std::string key = *Base64Decode(kDevKey);
  SharedKeyRequest put{"PUT",
                       "/devstoreaccount1/tierfs-test/dir/a%20b%2B%25%C3%BC",
                       {{"comp", "block"}, {"blockid", "MDEyMzQ1Njc4OWFiY2RlZi0wMDAwMDE="}},
                       {{"x-ms-date", "Thu, 26 Nov 2026 15:49:54 GMT"},
                        {"x-ms-version", "2021-08-06"},
                        {"X-Ms-Meta-Tierfs", " abc "},
                        {"Content-Type", "application/octet-stream"}},
                       10};
  EXPECT_EQ(SharedKeyStringToSign("devstoreaccount1", put),
            "PUT\n\n\n10\n\napplication/octet-stream\n\n\n\n\n\n\n"
            "x-ms-date:Thu, 26 Nov 2026 15:49:54 GMT\nx-ms-meta-tierfs:abc\nx-ms-version:2021-08-06\n"
            "/devstoreaccount1/devstoreaccount1/tierfs-test/dir/a%20b%2B%25%C3%BC\n"
            "blockid:MDEyMzQ1Njc4OWFiY2RlZi0wMDAwMDE=\ncomp:block");
  EXPECT_EQ(SharedKeyAuthorization("devstoreaccount1", key, put),
            "SharedKey devstoreaccount1:zaiBB74w08CE58xAKpoXsAOKiRHpR4YPhbQDpgiH1jo=");

  SharedKeyRequest list{"GET",
                        "/devstoreaccount1/tierfs-test",
                        {{"restype", "container"},
                         {"comp", "list"},
                         {"maxresults", "1000"},
                         {"prefix", "vol/a b"},
                         {"marker", "2!80!xyz"}},
                        {{"x-ms-date", "Thu, 26 Nov 2026 15:49:54 GMT"},
                         {"x-ms-version", "2021-08-06"},
                         {"x-ms-range", "bytes=0-99"}},
                        0};
  EXPECT_EQ(SharedKeyStringToSign("devstoreaccount1", list),
            "GET\n\n\n\n\n\n\n\n\n\n\n\n"
            "x-ms-date:Thu, 26 Nov 2026 15:49:54 GMT\nx-ms-range:bytes=0-99\nx-ms-version:2021-08-06\n"
            "/devstoreaccount1/devstoreaccount1/tierfs-test\n"
            "comp:list\nmarker:2!80!xyz\nmaxresults:1000\nprefix:vol/a b\nrestype:container");
  EXPECT_EQ(SharedKeyAuthorization("devstoreaccount1", key, list),
            "SharedKey devstoreaccount1:PR2URzirmY577Q6HFVJsaTSM+4WiJ9Mw4AxyAZRwDkY=");
}

TEST(AzureSign, AccountSasMatchesAnIndependentImplementation) {
  EXPECT_EQ(AccountSasForTests("devstoreaccount1", kDevKey, "rwdlac"),
            "sv=2021-08-06&ss=b&srt=sco&sp=rwdlac&st=2020-01-01T00%3A00%3A00Z&se=2099-01-01T00%3A00%3A00Z"
            "&spr=https%2Chttp&sig=3jnS6WUG2mHRq%2BceCPDvnR7AK9AwLCbbnBV%2FtH8XbgI%3D");
}

TEST(AzureSign, DatesAndBlockIds) {
  EXPECT_EQ(HttpDate(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(ParseHttpDate(HttpDate(1795000000)), 1795000000LL * 1000000000);
  EXPECT_EQ(AzureBlockId("0123456789abcdef", 1), "MDEyMzQ1Njc4OWFiY2RlZi0wMDAwMDE=");
  // Every block id of a blob has the same length.
  EXPECT_EQ(AzureBlockId("0123456789abcdef", 50000).size(), AzureBlockId("0123456789abcdef", 1).size());
  EXPECT_EQ(*Base64Decode(AzureBlockId("fedcba9876543210", 42)), "fedcba9876543210-000042");
}

// ---------------------------------------------------------------- URLs and XML

TEST(AzureLocation, BothUrlForms) {
  auto cloud = ParseAzureLocation("https://myaccount.blob.core.windows.net/data-1/");
  ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
  EXPECT_EQ(cloud->account, "myaccount");
  EXPECT_EQ(cloud->container, "data-1");
  EXPECT_FALSE(cloud->path_style);
  EXPECT_EQ(cloud->Endpoint(), "https://myaccount.blob.core.windows.net");
  EXPECT_EQ(cloud->ContainerPath(), "/data-1");
  EXPECT_EQ(cloud->Describe(), "azure://myaccount.blob.core.windows.net/data-1/");

  auto emu = ParseAzureLocation("http://127.0.0.1:10000/devstoreaccount1/tierfs?tries=3&timeout=7&put_limit=1M");
  ASSERT_TRUE(emu.ok()) << emu.status().ToString();
  EXPECT_EQ(emu->account, "devstoreaccount1");
  EXPECT_EQ(emu->container, "tierfs");
  EXPECT_TRUE(emu->path_style);
  EXPECT_EQ(emu->port, 10000);
  EXPECT_EQ(emu->tries, 3);
  EXPECT_EQ(emu->io_timeout_s, 7);
  EXPECT_EQ(emu->put_limit, 1u << 20);
  EXPECT_EQ(emu->ContainerPath(), "/devstoreaccount1/tierfs");
  EXPECT_EQ(emu->Describe(), "azure://127.0.0.1:10000/devstoreaccount1/tierfs/");
}

TEST(AzureLocation, BadUrlsSayWhatIsExpected) {
  const std::pair<std::string, std::string> bad[] = {
      {"myaccount.blob.core.windows.net/c1c", "no scheme"},
      {"ftp://myaccount.blob.core.windows.net/abc", "http or https"},
      {"https://myaccount.blob.core.windows.net", "no container"},
      {"http://127.0.0.1:10000/abc", "no account"},
      {"https://myaccount.blob.core.windows.net/Data", "invalid container name 'Data'"},
      {"https://myaccount.blob.core.windows.net/ab", "invalid container name 'ab'"},
      {"https://myaccount.blob.core.windows.net/a--b", "invalid container name"},
      {"http://127.0.0.1:10000/My_Account/abc", "invalid account name"},
      {"http://127.0.0.1:10000/acct1/abc/prefix", "no prefix inside the container"},
      {"https://u:hunter2@myaccount.blob.core.windows.net/abc", "keys do not belong in the URL"},
      {"https://myaccount.blob.core.windows.net/abc?tries=0", "tries must be a number from 1 to 20"},
      {"https://myaccount.blob.core.windows.net/abc?put_limit=10", "put_limit must be a size"},
      {"https://myaccount.blob.core.windows.net/abc?region=x", "unknown option 'region'"},
  };
  for (const auto& [url, why] : bad) {
    auto loc = ParseAzureLocation(url);
    ASSERT_FALSE(loc.ok()) << url;
    EXPECT_EQ(loc.status().code(), EINVAL) << url;
    EXPECT_TRUE(Contains(loc.status().message(), why)) << url << ": " << loc.status().message();
    EXPECT_TRUE(Contains(loc.status().message(), "https://ACCOUNT.blob.core.windows.net/CONTAINER"))
        << loc.status().message();
    EXPECT_FALSE(Contains(loc.status().message(), "hunter2")) << loc.status().message();
  }
}

TEST(AzureStoreSpec, CredentialsAreCheckedBeforeAnyRequest) {
  StorageSpec spec;
  spec.storage = "azure";
  spec.bucket = "https://myaccount.blob.core.windows.net/abc";
  auto none = NewAzureStore(spec);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), EINVAL);
  EXPECT_TRUE(Contains(none.status().message(), "--secret-key sas:TOKEN")) << none.status().message();

  spec.secret_key = "not base64!";
  auto bad_key = NewAzureStore(spec);
  ASSERT_FALSE(bad_key.ok());
  EXPECT_TRUE(Contains(bad_key.status().message(), "not base64")) << bad_key.status().message();
  EXPECT_FALSE(Contains(bad_key.status().message(), "not base64!")) << "the key must not be echoed";

  spec.secret_key = "sas:sv=2021-08-06&sp=r";
  auto bad_sas = NewAzureStore(spec);
  ASSERT_FALSE(bad_sas.ok());
  EXPECT_TRUE(Contains(bad_sas.status().message(), "no sig=")) << bad_sas.status().message();

  spec.secret_key = kDevKey;
  spec.access_key = "otheraccount";
  auto other = NewAzureStore(spec);
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(Contains(other.status().message(), "names account otheraccount")) << other.status().message();

  spec.access_key = "myaccount";
  spec.session_token = "tok";
  EXPECT_FALSE(NewAzureStore(spec).ok());
  spec.session_token.clear();
  auto good = NewAzureStore(spec);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE((*good)->HasObjectMeta());
  EXPECT_EQ((*good)->Describe(), "azure://myaccount.blob.core.windows.net/abc/");
}

TEST(AzureXml, BlobListsAndErrors) {
  const std::string body =
      "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults ServiceEndpoint=\"http://x/\" "
      "ContainerName=\"c\"><Prefix>v/</Prefix><MaxResults>2</MaxResults><Blobs>"
      "<Blob><Name>v/a &amp; b</Name><Properties><Last-Modified>Sun, 06 Nov 1994 08:49:37 GMT</Last-Modified>"
      "<Content-Length>12</Content-Length></Properties></Blob>"
      "<Blob><Name>v/c</Name><Properties><Content-Length>0</Content-Length></Properties></Blob>"
      "</Blobs><NextMarker>2!64!opaque</NextMarker></EnumerationResults>";
  BlobListPage page;
  ASSERT_TRUE(ParseBlobList(body, &page).ok());
  ASSERT_EQ(page.objects.size(), 2u);
  EXPECT_EQ(page.objects[0].key, "v/a & b");
  EXPECT_EQ(page.objects[0].size, 12u);
  EXPECT_EQ(page.objects[0].mtime_ns, 784111777LL * 1000000000);
  EXPECT_EQ(page.objects[1].size, 0u);
  EXPECT_EQ(page.next_marker, "2!64!opaque");

  BlobListPage level;  // with a delimiter: prefixes among the blobs
  ASSERT_TRUE(ParseBlobList("<EnumerationResults><Blobs><BlobPrefix><Name>v/a/</Name></BlobPrefix>"
                            "<Blob><Name>v/b</Name><Properties><Content-Length>1</Content-Length></Properties></Blob>"
                            "<BlobPrefix><Name>v/c/</Name></BlobPrefix></Blobs><NextMarker/></EnumerationResults>",
                            &level)
                  .ok());
  ASSERT_EQ(level.objects.size(), 1u);
  EXPECT_EQ(level.prefixes, (std::vector<std::string>{"v/a/", "v/c/"}));

  BlobListPage empty;
  ASSERT_TRUE(ParseBlobList("<EnumerationResults><Blobs/><NextMarker/></EnumerationResults>", &empty).ok());
  EXPECT_TRUE(empty.objects.empty());
  EXPECT_TRUE(empty.next_marker.empty());
  BlobListPage junk;
  Status st = ParseBlobList("<html>proxy error</html>", &junk);
  EXPECT_EQ(st.code(), EIO);
  EXPECT_TRUE(Contains(st.message(), "malformed Azure response")) << st.message();

  AzureError err;
  ASSERT_TRUE(ParseAzureError("<?xml version=\"1.0\"?><Error><Code>BlobNotFound</Code><Message>The specified blob "
                              "does not exist.\nRequestId:1\nTime:2</Message></Error>",
                              &err));
  EXPECT_EQ(err.code, "BlobNotFound");
  EXPECT_EQ(err.message, "The specified blob does not exist.");
  EXPECT_FALSE(ParseAzureError("", &err));

  EXPECT_EQ(BlockListXml({"QQ==", "Qg=="}),
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList><Latest>QQ==</Latest><Latest>Qg==</Latest>"
            "</BlockList>");
}

// ---------------------------------------------------------------- a scripted server

std::unique_ptr<ObjectStore> ScriptedStore(int port, const std::string& options = "") {
  StorageSpec spec;
  spec.storage = "azure";
  spec.bucket = "http://127.0.0.1:" + std::to_string(port) + "/devstoreaccount1/tierfs" + options;
  spec.secret_key = kDevKey;
  auto store = NewAzureStore(spec);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

std::string AzureErrorReply(int status, const std::string& code) {
  return "HTTP/1.1 " + std::to_string(status) + " Error\r\nx-ms-error-code: " + code +
         "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
}

TEST(AzureRetry, BusyAndTimedOutAnswersAreRetried) {
  TinyServer server([](int n, const std::string& line, size_t) {
    EXPECT_TRUE(line.starts_with("PUT /devstoreaccount1/tierfs/some/key ")) << line;
    if (n == 1) return AzureErrorReply(503, "ServerBusy");
    if (n == 2) return AzureErrorReply(500, "OperationTimedOut");
    if (n == 3) return AzureErrorReply(408, "RequestTimeout");
    return TinyServer::Reply(201, "Created", "");
  });
  auto store = ScriptedStore(server.port());
  Status st = store->Put("some/key", "data");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(server.requests(), 4);
}

TEST(AzureRetry, ClientErrorsAreFinal) {
  TinyServer server([](int, const std::string&, size_t) { return AzureErrorReply(403, "AuthenticationFailed"); });
  auto store = ScriptedStore(server.port());
  auto got = store->Get("k");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), EACCES);
  EXPECT_EQ(server.requests(), 1);
}

TEST(AzureRetry, PutsAboveTheLimitGoAsBlocksAndOneCommit) {
  std::vector<std::string> lines;
  std::mutex mu;
  TinyServer server([&](int, const std::string& line, size_t) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
    return TinyServer::Reply(201, "Created", "");
  });
  auto store = ScriptedStore(server.port(), "?put_limit=1K");
  std::string a(1500, 'a'), b(1000, 'b');
  ASSERT_TRUE(store->PutParts("big", {a, b}).ok());
  ASSERT_EQ(lines.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Contains(lines[i], "comp=block ")) << lines[i];
  EXPECT_TRUE(Contains(lines[3], "comp=blocklist")) << lines[3];
  EXPECT_EQ(server.body_sizes()[0], 1024u);
  EXPECT_EQ(server.body_sizes()[1], 1024u);
  EXPECT_EQ(server.body_sizes()[2], 2500u - 2048u);
  // At the limit: one Put Blob.
  ASSERT_TRUE(store->Put("small", std::string(1024, 'x')).ok());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_FALSE(Contains(lines[4], "comp=")) << lines[4];
}

// A container of 12000 blobs (more than one List Blobs answer of 5000 holds) listed 1000 at
// a time, with opaque markers: a caller paging with start_after = the last key it got costs
// one request per page, also for the empty page that ends its loop, and each request asks
// for just its page; a caller starting elsewhere costs one request of a full page.
TEST(AzureList, PagingCallersCostOneRequestPerPage) {
  constexpr int kKeys = 12000;
  auto name = [](int i) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "k/%05d", i);
    return std::string(buf);
  };
  std::atomic<int> lists{0};
  std::atomic<int> names_sent{0};
  TinyServer server([&](int, const std::string& line, size_t) {
    ++lists;
    std::smatch m;
    int max = std::regex_search(line, m, std::regex("maxresults=([0-9]+)")) ? std::stoi(m[1]) : 5000;
    int start = std::regex_search(line, m, std::regex("marker=opaque-([0-9]+)")) ? std::stoi(m[1]) : 0;
    std::string body = "<EnumerationResults><Blobs>";
    int i = start;
    for (; i < kKeys && i < start + max; ++i, ++names_sent) {
      body += "<Blob><Name>" + name(i) + "</Name><Properties><Content-Length>1</Content-Length></Properties></Blob>";
    }
    body += "</Blobs><NextMarker>" + (i < kKeys ? "opaque-" + std::to_string(i) : "") + "</NextMarker>";
    body += "</EnumerationResults>";
    return TinyServer::Reply(200, "OK", body);
  });
  auto store = ScriptedStore(server.port());
  std::vector<size_t> pages;
  std::string after;
  int got = 0;
  while (true) {
    auto page = store->List("k/", after, 1000);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    if (page->empty()) break;
    for (const auto& o : *page) EXPECT_EQ(o.key, name(got++));
    pages.push_back(page->size());
    after = page->back().key;
  }
  EXPECT_EQ(pages, std::vector<size_t>(12, 1000));
  EXPECT_EQ(got, kKeys);
  EXPECT_EQ(lists.load(), 13);
  // Every name once, and the last page again for the call that finds nothing after it (the
  // listing may have grown since).
  EXPECT_EQ(names_sent.load(), kKeys + 1000);

  lists = 0;
  auto mid = store->List("k/", name(1234), 10);
  ASSERT_TRUE(mid.ok());
  ASSERT_EQ(mid->size(), 10u);
  EXPECT_EQ(mid->front().key, name(1235));
  EXPECT_EQ(lists.load(), 1);
  // And from where that left off, one request again.
  lists = 0;
  auto next = store->List("k/", mid->back().key, 10);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->size(), 10u);
  EXPECT_EQ(next->front().key, name(1245));
  EXPECT_EQ(lists.load(), 1);
}

// ---------------------------------------------------------------- against Azurite

class AzuriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = Env("TIERFS_TEST_AZURE_ENDPOINT");
    account_ = Env("TIERFS_TEST_AZURE_ACCOUNT");
    key_ = Env("TIERFS_TEST_AZURE_KEY");
    if (endpoint_.empty()) GTEST_SKIP() << "TIERFS_TEST_AZURE_ENDPOINT is not set (no Azurite)";
  }

  StorageSpec Spec(const std::string& container, const std::string& secret) const {
    StorageSpec spec;
    spec.storage = "azure";
    spec.bucket = endpoint_ + "/" + account_ + "/" + container;
    spec.secret_key = secret;
    return spec;
  }

  std::unique_ptr<ObjectStore> Store(const std::string& container, const std::string& secret) const {
    auto store = NewAzureStore(Spec(container, secret));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::string endpoint_, account_, key_;
};

TEST_F(AzuriteTest, InitCreatesAMissingContainerAndAcceptsAnExistingOne) {
  const std::string container = "tierfs-init-" + RandomName();
  auto store = Store(container, key_);
  auto before = store->Get("x");
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.status().code(), ENOENT);
  EXPECT_TRUE(Contains(before.status().message(), "container " + container + " does not exist"))
      << before.status().message();
  Status st = store->Init();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(store->Put("x", "y").ok());
  EXPECT_EQ(*store->Get("x"), "y");
  st = Store(container, key_)->Init();
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto listed = store->List("", "", 0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u) << "the probe objects of Init must be gone";
  EXPECT_TRUE(store->Delete("x").ok());
}

TEST_F(AzuriteTest, AWrongKeyIsEACCESSayingTheKeyWasRefused) {
  ASSERT_TRUE(Store("tierfs-auth", key_)->Init().ok());
  const std::string wrong = Base64Encode(std::string(64, 'k'));
  auto store = Store("tierfs-auth", wrong);
  Status st = store->Init();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EACCES) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "account key of account " + account_ + " was refused")) << st.message();
  EXPECT_TRUE(Contains(st.message(), endpoint_)) << st.message();
  EXPECT_FALSE(Contains(st.message(), wrong)) << "the key must not be echoed";
  EXPECT_EQ(store->Put("k", "v").code(), EACCES);
  EXPECT_EQ(store->Head("k").status().code(), EACCES);
}

TEST_F(AzuriteTest, SasTokensWorkAndBadOnesAreEACCES) {
  const std::string container = "tierfs-sas-" + RandomName();
  auto full = Store(container, "sas:" + AccountSasForTests(account_, key_, "rwdlac"));
  Status st = full->Init();  // creates the container through the SAS
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(full->Put("obj", "through a SAS").ok());
  EXPECT_EQ(*full->Get("obj"), "through a SAS");

  auto read_only = Store(container, "sas:?" + AccountSasForTests(account_, key_, "rl"));
  auto got = read_only->Get("obj");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "through a SAS");
  Status put = read_only->Put("other", "x");
  EXPECT_EQ(put.code(), EACCES) << put.ToString();
  EXPECT_TRUE(Contains(put.message(), "SAS token does not allow this request")) << put.message();

  std::string forged = AccountSasForTests(account_, Base64Encode(std::string(64, 'f')), "rwdlac");
  auto bad = Store(container, "sas:" + forged);
  auto denied = bad->Get("obj");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), EACCES);
  EXPECT_TRUE(Contains(denied.status().message(), "SAS token was refused")) << denied.status().message();
  EXPECT_TRUE(full->Delete("obj").ok());
}

TEST_F(AzuriteTest, ObjectsAreBlockBlobsNamedByTheirKeys) {
  auto store = Store("tierfs-names", key_);
  ASSERT_TRUE(store->Init().ok());
  const std::string key = "vol/chunks/0/1/a b+c%";
  ASSERT_TRUE(store->PutWithMeta(key, "0123456789", "bWV0YQ==").ok());
  // Read back through another store: what Azure holds, not what this one remembers.
  auto other = Store("tierfs-names", "sas:" + AccountSasForTests(account_, key_, "rl"));
  std::string meta;
  auto got = other->GetWithMeta(key, 3, 4, &meta);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "3456");
  EXPECT_EQ(meta, "bWV0YQ==");
  auto listed = other->List("vol/chunks/", "", 0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, key);
  EXPECT_EQ((*listed)[0].size, 10u);
  EXPECT_GT((*listed)[0].mtime_ns, 0);
  EXPECT_TRUE(store->Delete(key).ok());
}

// An endpoint where nothing listens: EIO naming it, once the request's io timeout has
// passed, not after every try (20 here, with backoff that alone would take a minute).
TEST_F(AzuriteTest, AnUnreachableEndpointIsEIOWithinTheIoTimeout) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  close(fd);  // bound, never listening, now closed: connections are refused
  StorageSpec spec;
  spec.storage = "azure";
  spec.bucket = "http://127.0.0.1:" + std::to_string(port) + "/" + account_ + "/tierfs?tries=20";
  spec.secret_key = key_;
  spec.io_timeout_s = 2;
  auto store = NewAzureStore(spec);
  ASSERT_TRUE(store.ok());
  Status st = (*store)->Put("k", "v");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "cannot reach http://127.0.0.1:" + std::to_string(port))) << st.message();
  EXPECT_TRUE(Contains(st.message(), "write object k")) << st.message();
  // It stopped at the deadline, before its 20 tries were used (no wall-clock bound: the
  // message says how many it made).
  size_t at = st.message().find("gave up after ");
  ASSERT_NE(at, std::string::npos) << st.message();
  EXPECT_LT(std::stoi(st.message().substr(at + 14)), 20) << st.message();
}

}  // namespace
}  // namespace tierfs
