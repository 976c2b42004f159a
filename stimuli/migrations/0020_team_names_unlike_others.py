from django.db import migrations, models


def fill_keys(apps, schema_editor):
    """Each team's name normalised and its skeleton stored. Teams that already look alike keep
    their names (results may cite them); the later ones' keys take their id, so the constraint
    holds, and the organizers can rename them."""
    from stimuli.names import name_key, normalise_name

    Team = apps.get_model("stimuli", "Team")
    seen: set[tuple[int, str]] = set()
    for team in Team.objects.order_by("pk"):
        name = normalise_name(team.name) or team.name
        key = name_key(name)
        if (team.challenge_id, key) in seen or Team.objects.filter(
            challenge_id=team.challenge_id, name=name
        ).exclude(pk=team.pk).exists():
            name, key = team.name, f"{key}#{team.pk}"
        seen.add((team.challenge_id, key))
        Team.objects.filter(pk=team.pk).update(name=name, name_key=key)


class Migration(migrations.Migration):
    dependencies = [("stimuli", "0019_disqualification_sticks")]

    operations = [
        migrations.AddField(
            model_name="team",
            name="name_key",
            field=models.CharField(default="", editable=False, max_length=255),
            preserve_default=False,
        ),
        migrations.RunPython(fill_keys, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="team",
            constraint=models.UniqueConstraint(
                fields=("challenge", "name_key"),
                name="team_name_unlike_others",
                violation_error_message=(
                    "a team of this challenge has a name that looks the same (case, accents, "
                    "spacing and look-alike letters of other scripts are not told apart): "
                    "choose another"
                ),
            ),
        ),
    ]
