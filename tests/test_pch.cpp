// The program that builds the tests' shared precompiled header (tests/CMakeLists.txt).
int main() {
  return 0;
}
