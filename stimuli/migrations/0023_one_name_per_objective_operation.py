"""The objective stage's operations keep one name each: the FAD job's kind `fad` becomes
`rank_by_fad`, and an embedding job's purpose names the job that follows it (`rank_by_fad`,
`select_medoids`) instead of `fad` and `medoids`."""

from django.db import migrations

PURPOSES = {"fad": "rank_by_fad", "medoids": "select_medoids"}


def rename(apps, schema_editor, kinds: dict, purposes: dict) -> None:
    Job = apps.get_model("stimuli", "Job")
    for old, new in kinds.items():
        Job.objects.filter(kind=old).update(kind=new)
    for job in Job.objects.filter(params__has_key="purpose").only("pk", "params"):
        purpose = job.params.get("purpose")
        if purpose in purposes:
            job.params["purpose"] = purposes[purpose]
            Job.objects.filter(pk=job.pk).update(params=job.params)


def forwards(apps, schema_editor):
    rename(apps, schema_editor, {"fad": "rank_by_fad"}, PURPOSES)


def backwards(apps, schema_editor):
    rename(apps, schema_editor, {"rank_by_fad": "fad"}, {v: k for k, v in PURPOSES.items()})


class Migration(migrations.Migration):
    dependencies = [("stimuli", "0022_sign_ups_confirmed_by_email")]

    operations = [migrations.RunPython(forwards, backwards)]
