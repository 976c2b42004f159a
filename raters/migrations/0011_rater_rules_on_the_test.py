# The rater-quality rules move onto the listening test (scoring reads them there; the data is
# copied by scoring's 0006), and a session's verdict is "assessed", one word for applying them.
import raters.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('raters', '0010_private_anchors_and_gold'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='categorysession',
            name='session_excluded_when_judged',
        ),
        migrations.RemoveConstraint(
            model_name='categorysession',
            name='session_judged_when_answered',
        ),
        migrations.RenameField(
            model_name='categorysession', old_name='judged_with', new_name='assessed_with'
        ),
        migrations.AddField(
            model_name='listeningtest',
            name='exclude_at',
            field=models.PositiveSmallIntegerField(default=5, help_text='A session with this many misrated anchors or more is excluded.'),
        ),
        migrations.AddField(
            model_name='listeningtest',
            name='high_threshold',
            field=models.FloatField(default=7.0, help_text='An answer at or above this is high (the anchor rule).'),
        ),
        migrations.AddField(
            model_name='listeningtest',
            name='low_threshold',
            field=models.FloatField(default=3.0, help_text='An answer at or below this is low (the anchor rule).'),
        ),
        migrations.AddField(
            model_name='listeningtest',
            name='misrating_rules',
            field=models.JSONField(default=raters.models.default_misrating, help_text='Per anchor type, the conditions (quality_low, quality_high, fit_low, fit_high: at or beyond a threshold; quality_not_high, quality_not_low, fit_not_high, fit_not_low: on the wrong half of the scale, the middle included) of which any one makes an anchor misrated.'),
        ),
        migrations.AddField(
            model_name='listeningtest',
            name='rater_rules',
            field=models.JSONField(blank=True, default=dict, help_text='The other rater-quality rules (straight_lining, too_fast, not_listened, gold) and the anchor rule\'s action, e.g. {"too_fast": {"action": "exclude", "min_median_answer_s": 4}}; each action is exclude, flag or off (see raters.rules).'),
        ),
        migrations.AlterField(
            model_name='categorysession',
            name='excluded',
            field=models.BooleanField(default=False, help_text='Set aside by the rater-quality rules named by assessed_with.'),
        ),
        migrations.AlterField(
            model_name='listeningtest',
            name='anchors_per_session',
            field=models.PositiveSmallIntegerField(default=12, help_text='Hidden anchors per category session, a third of each type.'),
        ),
        migrations.AddConstraint(
            model_name='categorysession',
            constraint=models.CheckConstraint(condition=models.Q(('excluded', False), models.Q(('assessed_with', ''), _negated=True), _connector='OR'), name='session_excluded_when_assessed'),
        ),
        migrations.AddConstraint(
            model_name='categorysession',
            constraint=models.CheckConstraint(condition=models.Q(('assessed_with', ''), ('last_answer_at__isnull', False), _connector='OR'), name='session_assessed_when_answered'),
        ),
        migrations.AddConstraint(
            model_name='listeningtest',
            constraint=models.CheckConstraint(condition=models.Q(('low_threshold__lt', models.F('high_threshold'))), name='listening_low_below_high'),
        ),
        migrations.AddConstraint(
            model_name='listeningtest',
            constraint=models.CheckConstraint(condition=models.Q(('exclude_at__gte', 1)), name='listening_exclude_at_min'),
        ),
    ]
