"""Agent Skills folders in and out: a round trip gives the same files byte for byte; bad front matter is named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from skills_registry import folders
from skills_registry.models import Skill, SkillVersion
from skills_registry.services import skill_md

pytestmark = pytest.mark.all_teams

SAMPLE = Path(__file__).parent / "data" / "skills"


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def sample_copy(tmp_path) -> Path:
    """The sample skills plus an awkward one: CRLF SKILL.md, unicode, a nested binary, no trailing newline."""
    root = tmp_path / "in"
    shutil.copytree(SAMPLE, root)
    odd = root / "odd-one"
    (odd / "assets" / "deep").mkdir(parents=True)
    (odd / "SKILL.md").write_bytes(
        b"---\r\nname: odd-one\r\n# a comment the YAML parser drops\r\ndescription: >-\r\n  Folded text,\r\n"
        b"  with \xc3\xa9 accents\r\nversion: 1.0\r\nwhen: 2026-01-02\r\n---\r\nBody without final newline"
    )
    (odd / "assets" / "deep" / "blob.bin").write_bytes(bytes(range(256)) * 3)
    (odd / "assets" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))  # not UTF-8: kept as base64
    (odd / "assets" / "empty.txt").write_bytes(b"")
    return root


def test_import_then_export_gives_the_same_files(world, sample_copy, tmp_path, capsys):
    call_command("import_skills", str(sample_copy), "--team", "team-a")
    assert "created 4, updated 0, unchanged 0, rejected 0" in capsys.readouterr().out
    assert set(Skill.objects.for_team(world.team_a).values_list("name", flat=True)) == {
        "odd-one",
        "python-ci-debugging",
        "release-process",
        "support-refunds",
    }
    out = tmp_path / "out"
    call_command("export_skills", "--team", "team-a", str(out))
    before, after = tree(sample_copy), tree(out)
    assert sorted(after) == sorted(before)
    for path, data in before.items():
        assert after[path] == data, f"{path} differs after the round trip"
    # The binary reference is stored under the explicit marker, the text ones as text.
    release = Skill.objects.get(team=world.team_a, name="release-process")
    assert release.references["references/pipeline.png"]["encoding"] == "base64"
    assert release.references["references/smoke.sh"].endswith("echo ok\r\n")
    assert release.extra == {"license": "internal", "metadata": {"owner": "platform-team", "reviewed": "2026-10-02"}}
    assert release.tags == ["deploy", "release"]


def test_reimport_is_unchanged_and_a_changed_folder_makes_a_new_version(world, sample_copy, capsys):
    call_command("import_skills", str(sample_copy), "--team", "team-a")
    call_command("import_skills", str(sample_copy), "--team", "team-a")
    assert "created 0, updated 0, unchanged 4" in capsys.readouterr().out
    checklist = sample_copy / "release-process" / "references" / "checklist.md"
    checklist.write_text(checklist.read_text() + "- [ ] Status page updated\n")
    call_command("import_skills", str(sample_copy), "--team", "team-a")
    assert "created 0, updated 1, unchanged 3" in capsys.readouterr().out
    skill = Skill.objects.get(team=world.team_a, name="release-process")
    assert skill.version == 2
    v1, v2 = SkillVersion.objects.filter(skill=skill).order_by("number")
    assert v2.previous_hash == v1.content_hash != v2.content_hash
    assert (v1.operation, v2.operation, v2.author_kind) == ("import", "import", "system")


def test_bad_front_matter_names_the_file_and_the_others_still_import(world, sample_copy, tmp_path, capsys):
    bad = sample_copy / "broken-skill"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: broken-skill\ndescription: [unclosed\n---\nBody\n")
    nameless = sample_copy / "nameless"
    nameless.mkdir()
    (nameless / "SKILL.md").write_text("---\ndescription: no name here\n---\nBody\n")
    with pytest.raises(CommandError) as exc:
        call_command("import_skills", str(sample_copy), "--team", "team-a")
    assert exc.value.returncode == 1
    captured = capsys.readouterr()
    assert f"{bad / 'SKILL.md'}: front matter is not valid YAML" in captured.err
    assert f"{nameless / 'SKILL.md'}: front matter: name: a non-empty string is required" in captured.err
    assert "created 4, updated 0, unchanged 0, rejected 2" in captured.out
    assert Skill.objects.for_team(world.team_a).count() == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no front matter\n", "no YAML front matter"),
        ("---\n- a list\n---\n", "must be a YAML mapping"),
        ("---\nname: Bad Name\ndescription: d\n---\n", "is not a valid skill name"),
        ("---\nname: ok-name\ndescription: ''\n---\n", "description: a non-empty string is required"),
        ("---\nname: ok-name\ndescription: d\ntags: {a: 1}\n---\n", "tags must be a list of strings"),
        ("\ufeff---\nname: ok-name\ndescription: d\n---\n", "byte order mark"),
    ],
)
def test_parse_errors_name_the_file(text, message):
    with pytest.raises(folders.SkillFolderError) as exc:
        folders.parse_skill_md(text, "skills/x/SKILL.md")
    assert str(exc.value).startswith("skills/x/SKILL.md: ")
    assert message in str(exc.value)


def test_folder_name_must_match_and_missing_skill_md_is_named(tmp_path):
    folder = tmp_path / "other-name"
    folder.mkdir()
    with pytest.raises(folders.SkillFolderError, match=r"other-name/SKILL.md: missing"):
        folders.read_skill_folder(folder)
    (folder / "SKILL.md").write_text("---\nname: some-name\ndescription: d\n---\n")
    with pytest.raises(folders.SkillFolderError, match="does not match its folder 'other-name'"):
        folders.read_skill_folder(folder)


def test_an_edited_skill_gets_fresh_front_matter_that_parses_back(world, sample_copy):
    call_command("import_skills", str(sample_copy), "--team", "team-a")
    skill = Skill.objects.get(team=world.team_a, name="support-refunds")
    skill.description = "Refund requests: limits and who approves."
    text = skill_md(skill)
    assert text.startswith("---\nname: support-refunds\ndescription: 'Refund requests: limits and who approves.'\n")
    again = folders.parse_skill_md(text)
    assert (again.name, again.description, again.body) == (skill.name, skill.description, skill.body)


def test_export_refuses_a_non_empty_directory_and_unknown_team(world, tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(CommandError, match="is not empty"):
        call_command("export_skills", "--team", "team-a", str(tmp_path))
    with pytest.raises(CommandError, match="no team 'nope'"):
        call_command("import_skills", str(SAMPLE), "--team", "nope")


def test_import_is_per_team(world, tmp_path):
    call_command("import_skills", str(SAMPLE), "--team", "team-a")
    assert Skill.objects.for_team(world.team_b).count() == 0
    call_command("export_skills", "--team", "team-b", str(tmp_path / "b"))
    assert tree(tmp_path / "b") == {}
