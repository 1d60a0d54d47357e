from .views import current_membership, memberships


def teams(request):
    """The header's team switcher: the person's memberships and the team the lists show (one query a request)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    current = current_membership(request)
    return {
        "my_memberships": memberships(request),
        "current_membership": current,
        "current_team": current.team if current else None,
    }
