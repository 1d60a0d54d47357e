"""Real Agent Skills repositories: the 10 published skills of ../shared/real/skills round-trip byte for byte (the
1,068-character description of claude-api with a warning), a repository root is searched for every SKILL.md folder,
and executable files stay executable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from skills_registry import folders
from skills_registry.models import Skill, SkillVersion

pytestmark = pytest.mark.all_teams  # test code sees every team (tests/scoping.py)

REAL = Path(__file__).resolve().parents[2] / "shared" / "real" / "skills"  # CI lays shared/ beside the clone
if not REAL.is_dir():
    REAL = Path("/work/shared/real/skills")
REAL_NAMES = sorted(p.name for p in REAL.iterdir() if (p / "SKILL.md").is_file()) if REAL.is_dir() else []


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def executable(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IXUSR)


def skill(folder: Path, name: str, description: str = "Does one thing well.", body: str = "Body.\n") -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")
    return folder


@pytest.mark.skipif(len(REAL_NAMES) != 10, reason="shared/real/skills not available")
def test_the_ten_real_skills_import_and_export_byte_for_byte(world, tmp_path, capsys):
    call_command("import_skills", str(REAL), "--team", "team-a")
    captured = capsys.readouterr()
    assert "created 10, updated 0, unchanged 0, rejected 0" in captured.out
    # claude-api's description is over the specification's limit: imported, with a warning naming the file.
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: {REAL / 'claude-api' / 'SKILL.md'}: front matter: description is 1068 characters, over the "
        "Agent Skills limit of 1024; imported as it is (agents may cut it short)"
    ]
    assert len(Skill.objects.get(team=world.team_a, name="claude-api").description) == 1068

    out = tmp_path / "out"
    call_command("export_skills", "--team", "team-a", str(out))
    assert sorted(p.name for p in out.iterdir()) == REAL_NAMES
    for name in REAL_NAMES:
        before, after = tree(REAL / name), tree(out / name)
        assert sorted(after) == sorted(before), name
        for path, data in before.items():
            assert after[path] == data, f"{name}/{path} differs after the round trip"
    # The binary PDF went through base64; a second import changes nothing.
    theme = Skill.objects.get(team=world.team_a, name="theme-factory")
    assert any(folders.is_binary(v) for v in theme.references.values())
    call_command("import_skills", str(out), "--team", "team-a")
    assert "created 0, updated 0, unchanged 10, rejected 0" in capsys.readouterr().out


def test_a_repository_root_finds_every_skill_folder_below_it(world, tmp_path, capsys):
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "README.md").write_text("# Our skills\n")
    (repo / "docs" / "guide.md").write_text("How to write a skill.\n")
    skill(repo / "skills" / "deploy-app", "deploy-app")
    skill(repo / "skills" / "review-code", "review-code")
    skill(repo / "plugins" / "extra" / "skills" / "triage-bugs", "triage-bugs")
    # A skill's own subfolders are its files, even one holding a SKILL.md (a template it ships).
    skill(repo / "skills" / "deploy-app" / "templates" / "starter", "starter")
    # Hidden folders and dependency trees are not searched.
    skill(repo / ".git" / "stash-skill", "stash-skill")
    skill(repo / "node_modules" / "pkg-skill", "pkg-skill")

    assert [p.relative_to(repo).as_posix() for p in folders.skill_folders(repo)] == [
        "plugins/extra/skills/triage-bugs",
        "skills/deploy-app",
        "skills/review-code",
    ]
    call_command("import_skills", str(repo), "--team", "team-a")
    assert "created 3, updated 0, unchanged 0, rejected 0" in capsys.readouterr().out
    deploy = Skill.objects.get(team=world.team_a, name="deploy-app")
    assert "templates/starter/SKILL.md" in deploy.references
    # The old layouts still work: one skill folder, or a directory of skill folders.
    call_command("import_skills", str(repo / "skills" / "review-code"), "--team", "team-b")
    call_command("import_skills", str(repo / "skills"), "--team", "team-b")
    assert sorted(Skill.objects.for_team(world.team_b).values_list("name", flat=True)) == ["deploy-app", "review-code"]


def test_a_folder_with_no_skill_is_one_clear_error(world, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("nothing here\n")
    with pytest.raises(CommandError, match=r"no skill folder under .*: no SKILL.md in it or in any folder below it"):
        call_command("import_skills", str(tmp_path), "--team", "team-a")


def test_two_folders_naming_the_same_skill_are_reported_not_merged(world, tmp_path, capsys):
    skill(tmp_path / "a" / "same-name", "same-name", body="First.\n")
    skill(tmp_path / "b" / "same-name", "same-name", body="Second.\n")
    with pytest.raises(CommandError) as exc:
        call_command("import_skills", str(tmp_path), "--team", "team-a")
    assert exc.value.returncode == 1
    captured = capsys.readouterr()
    second = tmp_path / "b" / "same-name" / "SKILL.md"
    assert f"{second}: a skill named 'same-name' was already imported" in captured.err
    assert "created 1, updated 0, unchanged 0, rejected 1" in captured.out
    assert Skill.objects.get(team=world.team_a, name="same-name").body == "First.\n"


@pytest.mark.parametrize(("length", "warned"), [(1024, False), (1025, True), (folders.DESCRIPTION_HARD_MAX, True)])
def test_long_descriptions_are_accepted_with_a_warning(length, warned):
    doc = folders.parse_skill_md(f"---\nname: long-one\ndescription: {'d' * length}\n---\n")
    assert len(doc.description) == length
    assert bool(doc.warnings) is warned


def test_a_description_past_the_hard_limit_is_refused():
    text = f"---\nname: long-one\ndescription: {'d' * (folders.DESCRIPTION_HARD_MAX + 1)}\n---\n"
    with pytest.raises(folders.SkillFolderError, match=f"at most {folders.DESCRIPTION_HARD_MAX} characters"):
        folders.parse_skill_md(text, "x/SKILL.md")


def test_executable_scripts_keep_their_mode(world, tmp_path, capsys):
    src = skill(tmp_path / "in" / "run-tools", "run-tools")
    (src / "scripts").mkdir()
    script = src / "scripts" / "check.sh"
    script.write_bytes(b"#!/bin/sh\necho ok\n")
    script.chmod(0o755)
    tool = src / "scripts" / "tool.bin"  # an executable that is not text
    tool.write_bytes(b"\x7fELF\x00\x01" + bytes(range(200)))
    tool.chmod(0o700)
    plain = src / "scripts" / "notes.txt"
    plain.write_bytes(b"not a program\n")
    plain.chmod(0o644)

    call_command("import_skills", str(tmp_path / "in"), "--team", "team-a")
    stored = Skill.objects.get(team=world.team_a, name="run-tools").references
    assert stored["scripts/check.sh"] == {"encoding": "utf-8", "data": "#!/bin/sh\necho ok\n", "mode": "755"}
    assert stored["scripts/tool.bin"]["mode"] == "755" and folders.is_binary(stored["scripts/tool.bin"])
    assert stored["scripts/notes.txt"] == "not a program\n"

    out = tmp_path / "out"
    call_command("export_skills", "--team", "team-a", str(out))
    exported = out / "run-tools" / "scripts"
    assert tree(out / "run-tools") == tree(src)
    assert executable(exported / "check.sh") and executable(exported / "tool.bin")
    assert not executable(exported / "notes.txt")
    assert os.access(exported / "check.sh", os.X_OK)

    # A change of mode alone is a change of the skill: a new version, and back again.
    capsys.readouterr()
    script.chmod(0o644)
    call_command("import_skills", str(tmp_path / "in"), "--team", "team-a")
    assert "created 0, updated 1, unchanged 0" in capsys.readouterr().out
    again = Skill.objects.get(team=world.team_a, name="run-tools")
    assert again.references["scripts/check.sh"] == "#!/bin/sh\necho ok\n"
    assert SkillVersion.objects.filter(skill=again).count() == 2


def test_an_executable_text_reference_reads_as_text(world, client, tmp_path):
    src = skill(tmp_path / "in" / "run-tools", "run-tools")
    (src / "run.py").write_text("print('hi <b>')\n")
    (src / "run.py").chmod(0o755)
    call_command("import_skills", str(tmp_path / "in"), "--team", "team-a")
    client.force_login(world.alice)
    response = client.get(f"/skills/{world.team_a.slug}/run-tools/files/run.py")
    assert response.status_code == 200
    assert "print(&#x27;hi &lt;b&gt;&#x27;)" in response.content.decode()


@pytest.mark.parametrize(
    "left_beside",
    [".git/config", ".git/objects/ab/cdef", "node_modules/left-pad/index.js", ".venv/bin/python3", "__pycache__/x.pyc",
     "scripts/.DS_Store", "lib/node_modules/a.js", "site-packages/pkg/__init__.py"],
)  # fmt: skip
def test_what_a_clone_or_an_install_leaves_is_not_part_of_the_skill(tmp_path, left_beside):
    folder = skill(tmp_path / "release", "release")
    (folder / "reference.md").write_text("How to release.\n")
    (folder / ".eslintrc.json").write_text("{}\n")  # a hidden file of the skill's own is still one of its files
    extra = folder / left_beside
    extra.parent.mkdir(parents=True, exist_ok=True)
    extra.write_bytes(b"[remote]\n url = https://x-token:ghp_secret@github.com/acme/skills\n")
    doc = folders.read_skill_folder(folder)
    assert set(doc.references) == {"reference.md", ".eslintrc.json"}, sorted(doc.references)
