from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .models import Challenge


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"challenges": Challenge.objects.all()})
