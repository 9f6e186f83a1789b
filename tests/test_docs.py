"""The documentation's wiring, read as text (nothing imported, no MkDocs needed): every page is in
the site's navigation, the README keeps its two set-up commands and its links lead somewhere,
and the strict site build is part of the tests.  The build itself (`scripts/docs.sh`,
`mkdocs build --strict`: links, anchors, API references) runs in scripts/test.sh."""
import pathlib
import re
import shlex

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / 'docs'

# The README's two set-up commands, byte for byte: what a newcomer pastes, and what CI runs.
DEMO_COMMAND = ('python3 -m venv .venv && .venv/bin/pip install -e ".[demo]" && '
                '.venv/bin/tpu-estimator demo')
TEST_COMMAND = 'bash scripts/test.sh'


def _nav_pages():
  """The pages mkdocs.yml's `nav` lists (comment lines skipped), in order."""
  text = (ROOT / 'mkdocs.yml').read_text()
  nav = text[text.index('\nnav:\n'):]
  pages = []
  for line in nav.splitlines():
    if line.lstrip().startswith('#'):
      continue
    match = re.search(r'(?:^\s*-\s*|:\s*)([\w./-]+\.md)\s*$', line)
    if match:
      pages.append(match.group(1))
  return pages


def _sh_blocks(markdown):
  return [block.strip() for block in re.findall(r'```sh\n(.*?)```', markdown, re.S)]


def test_nav_lists_every_page_once_and_only_pages_that_exist():
  """A page missing from the nav is built but unreachable from the menu (MkDocs only logs it);
  a nav entry without its file fails the build later, with a less direct message."""
  on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob('*.md'))
  listed = _nav_pages()
  assert len(listed) == len(set(listed)), 'listed twice: %s' % sorted(
      p for p in listed if listed.count(p) > 1)
  assert sorted(listed) == on_disk, (
      'mkdocs.yml nav and docs/ differ: not in nav %s; in nav without a file %s' % (
          sorted(set(on_disk) - set(listed)), sorted(set(listed) - set(on_disk))))


def test_readme_keeps_exactly_its_two_setup_commands():
  """One command installs and runs the demo, one installs and runs the tests; both still name
  what exists (the `demo` extra, the `tpu-estimator` script, scripts/test.sh)."""
  readme = (ROOT / 'README.md').read_text()
  assert _sh_blocks(readme) == [DEMO_COMMAND, TEST_COMMAND]
  pyproject = (ROOT / 'pyproject.toml').read_text()
  assert re.search(r'^demo = \[', pyproject, re.M)
  assert re.search(r'^tpu-estimator = "tpu_estimator\.tools\.cli:main"', pyproject, re.M)
  assert (ROOT / shlex.split(TEST_COMMAND)[1]).is_file()
  # The getting-started page shows the same two commands (it is where the README sends readers).
  assert _sh_blocks((DOCS / 'getting-started.md').read_text())[:2] == [DEMO_COMMAND,
                                                                          TEST_COMMAND]


def test_readme_links_resolve():
  """The README's relative links work on a code host, where the site is not built: each one
  names a file of the repository (and a docs page is one the site builds)."""
  readme = (ROOT / 'README.md').read_text()
  targets = [t for t in re.findall(r'\]\(([^)#\s]+)', readme) if '://' not in t]
  assert any(t.startswith('docs/guides/') for t in targets)
  missing = [t for t in targets if not (ROOT / t).exists()]
  assert not missing, missing
  listed = set(_nav_pages())
  unlisted = [t for t in targets if t.startswith('docs/') and t.endswith('.md')
              and t[len('docs/'):] not in listed]
  assert not unlisted, unlisted


def test_strict_site_build_is_part_of_the_tests():
  """scripts/test.sh runs scripts/docs.sh and counts its exit status; docs.sh builds strictly
  with the `docs` extra of pyproject.toml."""
  test_sh = (ROOT / 'scripts' / 'test.sh').read_text()
  # (after its venv, built while the suite ran: `finished docs`)
  assert re.search(r'^(finished docs && )?bash scripts/docs\.sh.*\|\| docs_status=\$\?', test_sh,
                   re.M)
  assert re.search(r'docs_status == 0', test_sh)
  docs_sh = (ROOT / 'scripts' / 'docs.sh').read_text()
  assert 'build --strict' in docs_sh and "['docs']" in docs_sh
  assert re.search(r'^docs = \[.*mkdocs-material.*mkdocstrings\[python\]', (
      ROOT / 'pyproject.toml').read_text(), re.M)
  assert re.search(r'^\s*allow_inspection: false', (ROOT / 'mkdocs.yml').read_text(), re.M)


def test_pages_the_package_names_exist():
  """Error messages send users to documentation pages (`See docs/guides/....md`): each page a
  message names exists and the site builds it."""
  named = set()
  for path in (ROOT / 'tpu_estimator').rglob('*.py'):
    named.update(re.findall(r'docs/([\w/.-]+\.md)', path.read_text()))
  assert 'guides/legacy-programs.md' in named  # the legacy-program messages' page
  missing = sorted(page for page in named if not (DOCS / page).is_file())
  assert not missing, missing
  assert named <= set(_nav_pages())
