# The rater-quality rules now live on the listening test (raters 0011): each challenge's are
# copied there before they leave the scoring settings.

from django.db import migrations


def copy_to_the_test(apps, schema_editor):
    ScoringSettings = apps.get_model("scoring", "ScoringSettings")
    ListeningTest = apps.get_model("raters", "ListeningTest")
    for settings in ScoringSettings.objects.all():
        ListeningTest.objects.update_or_create(
            challenge_id=settings.challenge_id,
            defaults={
                "low_threshold": settings.low_threshold,
                "high_threshold": settings.high_threshold,
                "misrating_rules": settings.misrating_rules,
                "exclude_at": settings.exclude_at,
                "rater_rules": settings.quality_rules or {},
            },
        )


def copy_back(apps, schema_editor):
    ScoringSettings = apps.get_model("scoring", "ScoringSettings")
    ListeningTest = apps.get_model("raters", "ListeningTest")
    for test in ListeningTest.objects.all():
        ScoringSettings.objects.update_or_create(
            challenge_id=test.challenge_id,
            defaults={
                "low_threshold": test.low_threshold,
                "high_threshold": test.high_threshold,
                "misrating_rules": test.misrating_rules,
                "exclude_at": test.exclude_at,
                "quality_rules": test.rater_rules or {},
            },
        )


class Migration(migrations.Migration):

    dependencies = [
        ('scoring', '0005_misrating_help'),
        ('raters', '0011_rater_rules_on_the_test'),
    ]

    operations = [
        migrations.RunPython(copy_to_the_test, copy_back),
        migrations.RemoveConstraint(
            model_name='scoringsettings',
            name='scoring_low_below_high',
        ),
        migrations.RemoveConstraint(
            model_name='scoringsettings',
            name='scoring_exclude_at_min',
        ),
        migrations.RemoveField(
            model_name='scoringsettings',
            name='checks_per_session',
        ),
        migrations.RemoveField(
            model_name='scoringsettings',
            name='exclude_at',
        ),
        migrations.RemoveField(
            model_name='scoringsettings',
            name='high_threshold',
        ),
        migrations.RemoveField(
            model_name='scoringsettings',
            name='low_threshold',
        ),
        migrations.RemoveField(
            model_name='scoringsettings',
            name='misrating_rules',
        ),
        migrations.RemoveField(
            model_name='scoringsettings',
            name='quality_rules',
        ),
    ]
