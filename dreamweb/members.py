"""A team's members: add an existing person, invite one with a link, change a role, remove; every change audited.

The rules live here (views and tests call these): only what an admin may do reaches this module (the views check the
role through dreamweb.gates), a team always keeps at least one admin (checked under a lock on the team's admin rows,
so that two admins demoting each other at once cannot both succeed), and every change writes a ``MembershipChange``.

Invitations suit a self-hosted server without mail: the admin gets a link (shown once; only its hash is kept) and
sends it however they like. Whoever opens it signs in, or creates an account, and joins with the invitation's role.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from . import rls
from .models import Invitation, MemberAction, Membership, MembershipChange, Role, Team, hash_key

INVITATION_DAYS = 7


class MemberError(Exception):
    """A change to the members that is refused; the message is meant for the admin who asked."""


def _audit(team: Team, by, action: str, *, subject=None, subject_name: str = "", old: str = "", new: str = ""):
    MembershipChange.objects.create(
        team=team,
        actor=by,
        actor_name=by.get_username() if by is not None else "",
        subject=subject,
        subject_name=subject_name or (subject.get_username() if subject is not None else ""),
        action=action,
        old_role=old,
        new_role=new,
    )


def _role(role: str) -> str:
    if role not in Role.values:
        raise MemberError(f"Unknown role {role!r}.")
    return role


def find_user(identifier: str):
    """The account named by a username, else by an e-mail address (only when exactly one account has it)."""
    identifier = (identifier or "").strip()
    if not identifier:
        return None
    User = get_user_model()
    user = User.objects.filter(**{User.USERNAME_FIELD: identifier}).first()
    if user is None and "@" in identifier:
        matches = list(User.objects.filter(email__iexact=identifier)[:2])
        user = matches[0] if len(matches) == 1 else None
    return user


def add_member(team: Team, *, by, identifier: str, role: str) -> Membership:
    role = _role(role)
    user = find_user(identifier)
    if user is None:
        raise MemberError(
            f"No account is named {identifier.strip()!r}. Create an invitation link instead: "
            "whoever opens it can create their account."
        )
    with transaction.atomic():
        membership, created = Membership.objects.get_or_create(team=team, user=user, defaults={"role": role})
        if not created:
            raise MemberError(f"{user.get_username()} is already a member ({membership.get_role_display()}).")
        _audit(team, by, MemberAction.ADDED, subject=user, new=role)
    return membership


def _admins_locked(team: Team) -> list[Membership]:
    return list(Membership.objects.for_team(team).filter(role=Role.ADMIN).select_for_update().order_by("pk"))


def _member(team: Team, membership_id: int) -> Membership:
    membership = Membership.objects.for_team(team).select_related("user").select_for_update().filter(pk=membership_id)
    found = membership.first()
    if found is None:
        raise MemberError("That person is no longer a member.")
    return found


def _keep_an_admin(team: Team, membership: Membership, what: str) -> None:
    admins = _admins_locked(team)
    if membership.role == Role.ADMIN and [a.pk for a in admins] == [membership.pk]:
        raise MemberError(
            f"{membership.user.get_username()} is the team's last admin and cannot be {what}: "
            "make someone else an admin first."
        )


def change_role(team: Team, *, by, membership_id: int, role: str) -> Membership:
    role = _role(role)
    with transaction.atomic():
        membership = _member(team, membership_id)
        if membership.role == role:
            return membership
        if role != Role.ADMIN:
            _keep_an_admin(team, membership, "demoted")
        old = membership.role
        membership.role = role
        membership.save(update_fields=["role"])
        _audit(team, by, MemberAction.ROLE_CHANGED, subject=membership.user, old=old, new=role)
    return membership


def remove_member(team: Team, *, by, membership_id: int) -> Membership:
    with transaction.atomic():
        membership = _member(team, membership_id)
        _keep_an_admin(team, membership, "removed")
        membership.delete()
        _audit(team, by, MemberAction.REMOVED, subject=membership.user, old=membership.role)
    return membership


def create_invitation(team: Team, *, by, role: str, note: str = "") -> tuple[Invitation, str]:
    """A new invitation and its token (the only copy: the link is built from it and shown once)."""
    role = _role(role)
    token = secrets.token_urlsafe(24)
    with transaction.atomic():
        invitation = Invitation.objects.create(
            team=team,
            token_hash=hash_key(token),
            role=role,
            note=(note or "").strip()[:254],
            created_by=by,
            expires_at=timezone.now() + timedelta(days=INVITATION_DAYS),
        )
        _audit(team, by, MemberAction.INVITED, subject_name=invitation.note or "(a link)", new=role)
    return invitation, token


def revoke_invitation(team: Team, *, by, invitation_id: int) -> Invitation:
    with transaction.atomic():
        invitation = Invitation.objects.for_team(team).open().select_for_update().filter(pk=invitation_id).first()
        if invitation is None:
            raise MemberError("That invitation was already used, revoked or expired.")
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        _audit(
            team, by, MemberAction.INVITATION_REVOKED, subject_name=invitation.note or "(a link)", old=invitation.role
        )
    return invitation


def open_invitation(slug: str, token: str) -> Invitation | None:
    """The open invitation of the team with this slug for this token, else None. Opened by someone who is not in the
    team yet: the team is found by its slug (a narrow lookup) and the rest is read inside that team's scope only."""
    team_id = rls.team_id_for_slug(slug)
    if team_id is None or not token:
        return None
    with rls.team_scope(team_id):
        return (
            Invitation.objects.open().select_related("team").filter(team_id=team_id, token_hash=hash_key(token)).first()
        )


def accept_invitation(invitation: Invitation, *, user) -> Membership:
    """Join the invitation's team with its role (once: the invitation is claimed with a compare-and-set). A person
    who is a member already keeps their role (an invitation never demotes nor promotes anyone)."""
    team = invitation.team
    with rls.team_scope(team.pk), transaction.atomic():
        claimed = (
            Invitation.objects.open().filter(pk=invitation.pk).update(accepted_at=timezone.now(), accepted_by=user)
        )
        if claimed != 1:
            raise MemberError("This invitation was already used, revoked or has expired.")
        membership, created = Membership.objects.get_or_create(team=team, user=user, defaults={"role": invitation.role})
        if created:
            _audit(team, user, MemberAction.JOINED, subject=user, new=invitation.role)
    return membership
