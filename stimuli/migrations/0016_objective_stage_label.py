# Labels only: the objective stage is not called an evaluation (the evaluation set is).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('stimuli', '0015_team_submissions'),
    ]

    operations = [
        migrations.AlterField(
            model_name='challenge',
            name='phase',
            field=models.CharField(choices=[('setup', 'Setup'), ('objective', 'Objective stage'), ('listening', 'Listening test'), ('published', 'Published')], default='setup', max_length=16),
        ),
        migrations.AlterField(
            model_name='system',
            name='is_finalist',
            field=models.BooleanField(default=False, help_text='Chosen by the objective stage for the listening test.'),
        ),
    ]
