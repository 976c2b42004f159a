app_name = "stimuli"
urlpatterns: list = []
