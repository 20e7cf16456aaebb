// Gate node_links_no_database (spec 000, "The execution service holds
// nothing worth stealing": no route to the database). Structural: the
// executable of the execution role, airlock-node, names no database client
// among the shared libraries it needs (DT_NEEDED) and defines or imports no
// symbol of one (SQLite's sqlite3_*, libpq's PQ*). The same reading of
// `airlock`, which links both, shows the check can fail.
#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

struct ElfNames {
  std::vector<std::string> needed;   // DT_NEEDED
  std::vector<std::string> symbols;  // .symtab and .dynsym
  bool valid = false;
};

std::string stringAt(const std::string& image, std::size_t table, std::size_t size,
                     std::size_t offset) {
  if (offset >= size || table + size > image.size()) return "";
  const char* start = image.data() + table + offset;
  return std::string(start, strnlen(start, size - offset));
}

ElfNames readElf(const std::string& path) {
  ElfNames out;
  std::ifstream in(path, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (image.size() < sizeof(Elf64_Ehdr) || std::memcmp(image.data(), ELFMAG, SELFMAG) != 0 ||
      image[EI_CLASS] != ELFCLASS64)
    return out;
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof eh);
  if (eh.e_shoff + std::size_t{eh.e_shnum} * sizeof(Elf64_Shdr) > image.size()) return out;
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  std::memcpy(sections.data(), image.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  for (const auto& s : sections) {
    if (s.sh_link >= sections.size() || s.sh_offset + s.sh_size > image.size()) continue;
    const Elf64_Shdr& strings = sections[s.sh_link];
    if (s.sh_type == SHT_DYNAMIC) {
      for (std::size_t at = 0; at + sizeof(Elf64_Dyn) <= s.sh_size; at += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        std::memcpy(&d, image.data() + s.sh_offset + at, sizeof d);
        if (d.d_tag == DT_NEEDED)
          out.needed.push_back(stringAt(image, strings.sh_offset, strings.sh_size, d.d_un.d_val));
      }
    } else if (s.sh_type == SHT_SYMTAB || s.sh_type == SHT_DYNSYM) {
      for (std::size_t at = 0; at + sizeof(Elf64_Sym) <= s.sh_size; at += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        std::memcpy(&sym, image.data() + s.sh_offset + at, sizeof sym);
        out.symbols.push_back(stringAt(image, strings.sh_offset, strings.sh_size, sym.st_name));
      }
    }
  }
  out.valid = !out.needed.empty();
  return out;
}

// The names that say a database client is in the binary.
std::vector<std::string> databaseNames(const ElfNames& elf) {
  std::vector<std::string> found;
  for (const auto& lib : elf.needed)
    if (lib.find("libpq") != std::string::npos || lib.find("sqlite") != std::string::npos)
      found.push_back(lib);
  for (const auto& name : elf.symbols)
    if (name.rfind("sqlite3_", 0) == 0 || name.rfind("PQconnect", 0) == 0 ||
        name.rfind("PQexec", 0) == 0)
      found.push_back(name);
  return found;
}

TEST(GateNodeLinksNoDatabase, AirlockNodeNamesNoDatabaseClient) {
  const ElfNames node = readElf(AIRLOCK_NODE_BINARY);
  ASSERT_TRUE(node.valid) << AIRLOCK_NODE_BINARY;
  EXPECT_THAT(node.needed, ::testing::Contains(::testing::HasSubstr("libc.so")));
  EXPECT_THAT(databaseNames(node), ::testing::IsEmpty());
}

TEST(GateNodeLinksNoDatabase, TheCheckFindsTheClientsAirlockLinks) {
  const ElfNames both = readElf(AIRLOCK_BINARY);
  ASSERT_TRUE(both.valid) << AIRLOCK_BINARY;
  const auto found = databaseNames(both);
  EXPECT_THAT(found, ::testing::Contains(::testing::HasSubstr("libpq")));
  EXPECT_THAT(found, ::testing::Contains(::testing::HasSubstr("sqlite")));
}

}  // namespace
